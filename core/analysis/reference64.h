// fp64 recomputation of a case for the recorded-output check and precision_loss, bit-identical
// to the naive reference (kernels/reference) and streamed: the forward in blocks of query rows
// (their scores take at most 64 MiB over all workers), the backward one (batch, kv group) per
// worker, key tile by key tile, holding nothing of size [Sq, Sk].
#pragma once

#include <cstdint>
#include <functional>

#include "core/analysis/case_analysis.h"
#include "core/case_inputs.h"

namespace attnscope {

// Same semantics as kernels/reference (mask fill of in.params.precision, softcap, bias, safe
// rows); gradients of sum(O * dO) (dO = 1 without a recorded dO) when `gradients` is set.
// `cancelled` (optional, thread-safe) is polled before each block of query rows (forward) and
// each key tile (backward); once true the remaining ones are skipped and their entries stay 0.
Reference64 compute_reference64(const CaseInputs& in, bool gradients, int threads,
                                const std::function<bool()>& cancelled = {});

}  // namespace attnscope
