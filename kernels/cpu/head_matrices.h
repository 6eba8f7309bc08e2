// Score-shaped matrices S, P, dP, dS of one (batch, head) exactly as the emulated CPU kernel
// (CpuAttnOptions::mode, params.precision) computes them, recomputed tile by tile with its own
// stage functions: at full resolution for a window, or pooled to a requested size for any
// sequence length without materialising Sq x Sk (DESIGN §5 "Large sequences").
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/fused_attention.h"

namespace attnscope {

// A window of the [Sq, Sk] matrices: query rows [row_begin, row_end), keys [col_begin,
// col_end). An end of -1 means Sq / Sk. Functions return it resolved.
struct MatrixWindow {
  int64_t row_begin = 0, row_end = -1, col_begin = 0, col_end = -1;
};

// Which matrices to compute. S alone needs no forward; P, dP and dS recompute the forward's
// m and l per q tile (about one forward pass more).
struct MatrixSelection {
  bool s = true, p = true, dp = true, ds = true;
  // Pooled only. false: each cell keeps max, min and its class alone (PooledMatrix::cls), the
  // class counts are summed over the matrix (PooledMatrix::totals): a third of the memory
  // traffic, and all a heatmap draws.
  bool cell_counts = true;
};

// The forward's rows of head (b, h) from a cpu_attention run on the same params, mode and
// inputs: m, l (CpuAttnResult::m, l) and D (CpuAttnResult::d), each [B, H, Sq] as that run
// returns them. Given to the fused recomputation, it skips its own forward pass and uses these
// rows, which are bit for bit what it would recompute. Ignored in unfused mode.
struct ForwardRows {
  const float* m = nullptr;
  const float* l = nullptr;
  const float* d = nullptr;
};

// Full-resolution matrices of a window, row-major [rows x cols] (rows = row_end - row_begin,
// cols = col_end - col_begin); unselected ones are empty.
//   s:  final scores (scale, softcap, bias, mask fill) as the kernel holds them
//   p:  fused: the backward's recomputed fp32 P = exp(S - m) / l (BackwardP::from_lse:
//       exp(S - LSE)); unfused: round(softmax(S)). Undropped: dropout enters only P V, P^T dO
//   dp: the dP that enters dS: fused Z o (dO V^T) in fp32 with Z = keep / (1 - p) (1 without
//       dropout); unfused round(dO V^T), with dropout then round(that * noise)
//   ds: fused: round(P (dP - D) f') with f' the softcap derivative (0 where masked);
//       unfused: round(P (dP - D)), the softmax backward before softcap and scale
//   masked: MaskedEntry per entry
struct HeadMatrices {
  MatrixWindow window;
  int64_t rows = 0, cols = 0;
  std::vector<float> s, p, dp, ds;
  std::vector<uint8_t> masked;
};

// Both recomputations poll CpuAttnOptions::cancelled per q tile and per tile block and throw
// KernelCancelled (fused_attention.h) when it returns true.
HeadMatrices cpu_head_matrices(const AttnParams& params, const CpuAttnOptions& options,
                               const CpuAttnInputs& inputs, int64_t b, int64_t h,
                               MatrixWindow window = {}, MatrixSelection which = {},
                               const ForwardRows* rows = nullptr);

// One pooled matrix, row-major [rows x cols] cells. Each cell counts its entries by class:
// NaN (always, even where masked), masked (finite values at masked positions, and the fill of
// S there), +inf, -inf, and finite; max / min / mean are over the finite, unmasked entries
// and NaN where `finite` is 0. A single NaN stays visible in its cell's `nan`.
// The class of a pooled cell: its worst entry's (NaN, then +inf, then -inf), else masked when
// it has no finite entry, else finite.
enum class PooledClass : uint8_t { finite = 0, nan, pos_inf, neg_inf, masked };

// Counts of a pooled matrix's entries by class, over all its cells.
struct PooledTotals {
  int64_t finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, masked = 0;
};

struct PooledMatrix {
  std::vector<float> max, min, mean;
  std::vector<int32_t> finite, nan, pos_inf, neg_inf, masked;  // empty without cell_counts
  std::vector<PooledClass> cls;  // only without MatrixSelection::cell_counts
  PooledTotals totals;
};

// Pooled matrices of a window: out_rows x out_cols cells (each clamped to [1, window size]).
// Cell (r, c) covers query rows [row_edges[r], row_edges[r + 1]) and keys [col_edges[c],
// col_edges[c + 1]) (absolute indices), edges[e] = begin + floor(e * size / out_size).
// Streams q tile by q tile: memory O(out_rows * out_cols + tiles in flight).
struct PooledHeadMatrices {
  MatrixWindow window;
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> row_edges, col_edges;  // [rows + 1], [cols + 1]
  PooledMatrix s, p, dp, ds;                  // unselected ones are empty
};

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
