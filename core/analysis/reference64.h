// fp64 recomputation of a case for the recorded-output check and precision_loss, bit-identical
// to the naive reference (kernels/reference) and streamed: the forward in blocks of query rows
// (their scores take at most 64 MiB over all workers), the backward one (batch, kv group) per
// worker (or all workers sharing one), key tile by key tile, holding nothing of size [Sq, Sk];
// whole (compute_reference64) or handed over group by group (stream_reference64).
#pragma once

#include <cstdint>
#include <functional>

#include "core/case_inputs.h"
#include "core/value_reader.h"

namespace attnscope {

// fp64 recomputation of a whole case.
struct Reference64 {
  std::vector<double> o, lse;  // [B, H, Sq, Dv], [B, H, Sq]
  bool has_gradients = false;
  std::vector<double> dq, dk, dv;  // [B, H, Sq, D], [B, Hk, Sk, D], [B, Hk, Sk, Dv]
};

// What the reference reads: the run's parameters (mask, bias, dropout pointers included) and
// q [B,H,Sq,D], k [B,Hk,Sk,D], v [B,Hk,Sk,Dv], dO [B,H,Sq,Dv] as fp64 ranges of flat canonical
// tensors (an empty dout: dO = 1), read a block or a head at a time.
struct ReferenceInputs {
  AttnParams params;
  ValueReader q, k, v, dout;
};

// The fp64 arrays of `in` (made with InputValues::fp64).
ReferenceInputs reference_inputs(const CaseInputs& in);
// The loaded case's own q, k, v, dO (no fp64 copy of them is made) under `params`.
ReferenceInputs reference_inputs(const CaseData& data, const AttnParams& params);

// Same semantics as kernels/reference (mask fill of in.params.precision, softcap, bias, safe
// rows); gradients of sum(O * dO) (dO = 1 without a recorded dO) when `gradients` is set.
// `cancelled` (optional, thread-safe) is polled before each block of query rows (forward) and
// each key tile (backward); once true the remaining ones are skipped and their entries stay 0.
Reference64 compute_reference64(const ReferenceInputs& in, bool gradients, int threads,
                                const std::function<bool()>& cancelled = {});
inline Reference64 compute_reference64(const CaseInputs& in, bool gradients, int threads,
                                       const std::function<bool()>& cancelled = {}) {
  return compute_reference64(reference_inputs(in), gradients, threads, cancelled);
}

// One (batch, kv group) of the reference: the query heads h = g * G + x (x < G) of batch b,
// o [G, Sq, Dv], lse [G, Sq], dq [G, Sq, D], and kv head g's dk [Sk, D], dv [Sk, Dv] (the
// gradients null without them). Valid during the call it is handed to.
struct GroupReference {
  int64_t b = 0, g = 0;
  const double* o = nullptr;
  const double* lse = nullptr;
  const double* dq = nullptr;
  const double* dk = nullptr;
  const double* dv = nullptr;
};

// Reference values a round of stream_reference64 holds by default (fp64): 64 MiB.
constexpr int64_t kReferenceRoundBytes = int64_t{64} << 20;

// The same values as compute_reference64, handed to `each` group by group in (b, g) order
// (query heads and kv heads in increasing order), a round of groups computed at a time and
// freed after: a consumer that reads the reference head by head never holds all of it. A round
// holds as many groups as round_bytes takes, at least one per worker. Once `cancelled` is true
// no further group is handed over.
void stream_reference64(const ReferenceInputs& in, bool gradients, int threads,
                        const std::function<void(const GroupReference&)>& each,
                        const std::function<bool()>& cancelled = {},
                        int64_t round_bytes = kReferenceRoundBytes);

}  // namespace attnscope
