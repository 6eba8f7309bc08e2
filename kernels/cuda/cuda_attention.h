// CUDA fused attention (FlashAttention-2 forward and backward, DESIGN §3 "fused" semantics) on
// the shared AttnParams: fp16 / bf16 operands on tensor cores (WMMA, fp32 accumulation) and
// fp32 on CUDA cores, with the CPU kernels' tiles (64 x 64), stage names and instrumentation.
// Plain C++ header: callers need no CUDA headers. Built only when nvcc exists
// (ATTNSCOPE_WITH_CUDA); every function is safe to call on a machine without a GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/attn_matrices.h"
#include "kernels/attn_params.h"
#include "kernels/attn_tensors.h"
#include "kernels/attn_trace.h"

namespace attnscope::cuda {

// Number of CUDA devices the runtime sees (0 without a driver or a GPU; never throws).
int device_count();
// "NVIDIA H200 (sm_90, 132 SMs)", or the runtime's reason when there is none.
std::string device_description();

// Waits for all work on device 0 (also other libraries' work, e.g. LibTorch's streams);
// throws std::runtime_error on a pending CUDA error.
void device_synchronize();

// Empty when the GPU path runs params at params.precision (f32, f16, bf16; f64 is not run),
// otherwise why not, so callers fall back to the CPU kernels: the tiles of head_dim and
// head_dim_v must fit the device's shared memory (checked against the first device, or against
// sm_90's 227 KB when there is none).
std::string unsupported_reason(const AttnParams& params);
inline bool supported(const AttnParams& params) {
  return unsupported_reason(params).empty();
}

// Bytes of shared memory the forward / backward kernels need for params' head sizes.
int64_t forward_shared_bytes(const AttnParams& params);
int64_t backward_shared_bytes(const AttnParams& params);

// What a traced run records (DESIGN §4); shapes as CpuTrace, tiles of 64 x 64. Tile stats hold
// max_abs_s, max_exp_arg, masked, computed and the non-finite counts of S and P (forward and
// backward), the accumulator rows (forward), dP, dS and the dK_j / dV_j accumulators after the
// tile (backward); dq stays 0 (dQ is accumulated with atomics in global memory). Provenance is
// counted per code (Provenance as index) with the CPU recorder's rule applied per row; for O the
// "input" cause also covers a non-finite K tile of the kv head (the CPU checks only V there).
struct CudaTrace {
  int64_t q_tiles = 0, kv_tiles = 0;
  std::vector<float> m, l, lse;                 // [B, H, Sq]
  std::vector<uint32_t> row_causes;             // [B, H, Sq] RowCause flags (attn_types.h)
  std::vector<TileStats> forward_tiles;         // [B, H, n_q, n_kv]
  std::vector<TileStats> backward_tiles;        // [B, H, n_q, n_kv]
  std::vector<float> d;                         // [B, H, Sq]
  std::vector<float> dq_row_norm;               // [B, H, Sq]
  std::vector<float> dk_row_norm, dv_row_norm;  // [B, Hk, Sk]
  std::vector<double> dq_head_norm, dk_head_norm, dv_head_norm;  // [B, H], [B, Hk], [B, Hk]
  // Non-finite elements per Provenance code (index = code, kProvenanceCodes entries) of O and
  // LSE together,
  // and of dQ, dK, dV together.
  std::vector<int64_t> forward_provenance, backward_provenance;
};

// Outputs downloaded as fp32 (values exact in the precision for o, dq, dk, dv).
struct CudaOutputs {
  std::vector<float> o, lse, m, l;   // [B, H, Sq, Dv], [B, H, Sq] x3
  std::vector<float> d, dq, dk, dv;  // [B, H, Sq], [B, H, Sq, D], [B, Hk, Sk, D], [B, Hk, Sk, Dv]
};

// One prepared run on the device: inputs uploaded once (rounded to the precision), outputs
// kept on the device; forward() and backward() launch the kernels and wait for them, so wall
// time brackets the kernels. Throws std::runtime_error (CUDA errors, with the call) and
// std::invalid_argument (unsupported params).
class CudaAttention {
 public:
  // inputs as in CpuAttnInputs (dout = nullptr: ones); mask and bias come through params and
  // are copied to the device. instrument: record CudaTrace on every run.
  CudaAttention(const AttnParams& params, const CpuAttnInputs& inputs, bool instrument);
  ~CudaAttention();
  CudaAttention(const CudaAttention&) = delete;
  CudaAttention& operator=(const CudaAttention&) = delete;

  void forward();
  void backward();  // needs a forward() first
  CudaOutputs outputs() const;
  // Downloads the instrumentation of the latest runs (empty vectors where none ran traced).
  CudaTrace trace() const;
  // Pooled S and P of query head (b, h), cells and edges as cpu_pooled_matrices in fused mode
  // (P = exp(S - m) / l with this run's forward m, l; needs forward()). dP and dS are not pooled
  // on the GPU: selecting them throws std::invalid_argument (use cpu_pooled_matrices).
  PooledHeadMatrices pooled_matrices(int64_t b, int64_t h, int64_t out_rows, int64_t out_cols,
                                     MatrixWindow window = {},
                                     MatrixSelection which = {true, true, false, false}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One tile visit of the CUDA backward's main loop for one (batch, head), in the order a CTA
// of kv tile kv_tile walks it (kv tiles run in parallel, q tiles in order within one).
struct CudaStepTile {
  int64_t kv_tile = 0, q_tile = 0;
  // Not computed: causally hidden, a -inf fill, and clean kv and q tiles (finite K / V; finite
  // Q, dO, D and forward statistics), as the CPU kernel's backward_skips.
  bool skipped = false;
};

// The backward's tile sequence of one head: kv tile outer, q tile inner, as the stepper
// (kernels/cpu/backward_stepper.h) walks the CPU kernel. kv_clean [n_kv] and q_clean [n_q]
// flag the clean tiles of that head (empty = all clean).
std::vector<CudaStepTile> backward_tile_sequence(const AttnParams& params,
                                                 const std::vector<uint8_t>& kv_clean,
                                                 const std::vector<uint8_t>& q_clean);

}  // namespace attnscope::cuda
