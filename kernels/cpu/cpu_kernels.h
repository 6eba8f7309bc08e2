// Internal interface between the public entry points (fused_attention.cpp) and the four CPU
// drivers: inputs already rounded to the emulated precision, plus shared preparation helpers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attn_params.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope::cpu {

// Inputs rounded to the emulated precision: views of the caller's arrays (f32) or of the
// owned copies. dout is never null once prepared for a backward (ones when absent).
struct PreparedInputs {
  const float* q = nullptr;     // [B, H, Sq, D]
  const float* k = nullptr;     // [B, Hk, Sk, D]
  const float* v = nullptr;     // [B, Hk, Sk, Dv]
  const float* dout = nullptr;  // [B, H, Sq, Dv]
  std::vector<float> q_copy, k_copy, v_copy, dout_copy;
};

// Checks sizes and pointers; throws std::invalid_argument naming the offending field.
void validate(const AttnParams& params, const CpuAttnInputs& inputs);

PreparedInputs prepare_inputs(const AttnParams& params, const CpuAttnInputs& inputs, bool backward,
                              int threads);

// Number of tiles of size `tile` covering n.
inline int64_t tile_count(int64_t n, int64_t tile) {
  return (n + tile - 1) / tile;
}

// K^T (or V^T) in kv tiles: x holds `heads` matrices [Sk x dim]; the result holds, per head
// and kv tile jt, the block [dim x Bc] with element (e, c) = x[jt * Bc + c][e] (columns past
// the last key are left 0). Tile jt of head g starts at (g * tile_count(Sk, Bc) + jt) * dim * Bc.
std::vector<float> transpose_kv_tiles(const float* x, int64_t heads, int64_t sk, int64_t dim,
                                      int threads);

// Per kv tile [B * Hk][n_kv]: 1 when its K and V rows are all finite. A causally hidden tile
// is skipped only then, so that 0 * NaN still poisons the output exactly as in the reference.
std::vector<uint8_t> finite_kv_tiles(const AttnParams& params, const PreparedInputs& in,
                                     int threads);

void fused_forward(const AttnParams& params, const PreparedInputs& in, int threads,
                   const CpuForwardOutputs& out);
void fused_backward(const AttnParams& params, const PreparedInputs& in, const CpuForwardView& fwd,
                    int threads, const CpuBackwardOutputs& out);
void unfused_forward(const AttnParams& params, const PreparedInputs& in, int threads,
                     const CpuForwardOutputs& out);
void unfused_backward(const AttnParams& params, const PreparedInputs& in, int threads,
                      const CpuBackwardOutputs& out);

}  // namespace attnscope::cpu
