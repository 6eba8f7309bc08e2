// Score-shaped matrices S, P, dP, dS of one (batch, head) exactly as the emulated CPU kernel
// (CpuAttnOptions::mode, params.precision) computes them, recomputed tile by tile with its own
// stage functions: at full resolution for a window, or pooled to a requested size for any
// sequence length without materialising Sq x Sk (DESIGN §5 "Large sequences"). The result
// types: kernels/attn_matrices.h.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/attn_matrices.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

// The forward's rows of head (b, h) from a cpu_attention run on the same params, mode and
// inputs: m, l (CpuAttnResult::m, l) and D (CpuAttnResult::d), each [B, H, Sq] as that run
// returns them. Given to the fused recomputation, it skips its own forward pass and uses these
// rows, which are bit for bit what it would recompute. Ignored in unfused mode.
struct ForwardRows {
  const float* m = nullptr;
  const float* l = nullptr;
  const float* d = nullptr;
};

// Both recomputations poll CpuAttnOptions::cancelled per q tile and per tile block and throw
// KernelCancelled (fused_attention.h) when it returns true.
HeadMatrices cpu_head_matrices(const AttnParams& params, const CpuAttnOptions& options,
                               const CpuAttnInputs& inputs, int64_t b, int64_t h,
                               MatrixWindow window = {}, MatrixSelection which = {},
                               const ForwardRows* rows = nullptr);

// Pooled matrices of a window: out_rows x out_cols cells (each clamped to [1, window size]),
// edges as PooledHeadMatrices says. Streams q tile by q tile: memory O(out_rows * out_cols + tiles
// in flight).
PooledHeadMatrices cpu_pooled_matrices(const AttnParams& params, const CpuAttnOptions& options,
                                       const CpuAttnInputs& inputs, int64_t b, int64_t h,
                                       int64_t out_rows, int64_t out_cols, MatrixWindow window = {},
                                       MatrixSelection which = {},
                                       const ForwardRows* rows = nullptr);

// The pooled matrices of one head gathered by cpu_attention_backward while it computes each
// tile, without recomputing anything (set CpuAttnOptions::pooled). `result` receives bit for
// bit what cpu_pooled_matrices(params, options, inputs, b, h, out_rows, out_cols, window,
// which, &rows) returns with the forward rows of that run, in both modes. A fused backward
// also computes the intermediates of the tiles it skips (causally hidden) where they overlap
// the window.
struct PooledCapture {
  int64_t b = 0, h = 0;
  int64_t out_rows = 512, out_cols = 512;
  MatrixWindow window;
  MatrixSelection which;
  PooledHeadMatrices result;
};

}  // namespace attnscope
