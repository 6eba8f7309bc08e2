// Score-shaped matrices S, P, dP, dS of one (batch, head) as the kernels return them, shared by
// the CPU (kernels/cpu/head_matrices.h) and CUDA (CudaAttention::pooled_matrices) kernels:
// which matrices to compute, full-resolution blocks of a window, and pooled cells covering any
// sequence length without materialising Sq x Sk (DESIGN §5 "Large sequences").
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/attn_params.h"
#include "kernels/attn_types.h"

namespace attnscope {

// The window with -1 ends resolved (MatrixWindow); throws std::invalid_argument when it is
// empty or leaves [0, Sq) x [0, Sk).
inline MatrixWindow resolve_window(const AttnParams& params, MatrixWindow w) {
  if (w.row_end < 0) w.row_end = params.seqlen_q;
  if (w.col_end < 0) w.col_end = params.seqlen_k;
  if (w.row_begin < 0 || w.row_begin >= w.row_end || w.row_end > params.seqlen_q ||
      w.col_begin < 0 || w.col_begin >= w.col_end || w.col_end > params.seqlen_k) {
    throw std::invalid_argument(
        "cpu_head_matrices: window must be a non-empty part of [0, Sq) x [0, Sk)");
  }
  return w;
}

// Which matrices to compute. S alone needs no forward; P, dP and dS recompute the forward's
// m and l per q tile (about one forward pass more).
struct MatrixSelection {
  bool s = true, p = true, dp = true, ds = true;
  // Pooled only. false: each cell keeps max, min and its class alone (PooledMatrix::cls), the
  // class counts are summed over the matrix (PooledMatrix::totals): a third of the memory
  // traffic, and all a heatmap draws.
  bool cell_counts = true;
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

// One pooled matrix, row-major [rows x cols] cells. Each cell counts its entries by CellClass:
// NaN (always, even where masked), masked (finite values at masked positions, and the fill of
// S there), +inf, -inf, and finite; max / min / mean are over the finite, unmasked entries
// and NaN where `finite` is 0. A single NaN stays visible in its cell's `nan`. The class of a
// cell is cell_class of its counts.
struct PooledMatrix {
  std::vector<float> max, min, mean;
  std::vector<int32_t> finite, nan, pos_inf, neg_inf, masked;  // empty without cell_counts
  std::vector<CellClass> cls;  // only without MatrixSelection::cell_counts
  CellCounts totals;           // entries by class over all cells
};

// Pooled matrices of a window: rows x cols cells. Cell (r, c) covers query rows
// [row_edges[r], row_edges[r + 1]) and keys [col_edges[c], col_edges[c + 1]) (absolute
// indices), edges[e] = begin + floor(e * size / out_size).
struct PooledHeadMatrices {
  MatrixWindow window;
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> row_edges, col_edges;  // [rows + 1], [cols + 1]
  PooledMatrix s, p, dp, ds;                  // unselected ones are empty
};

}  // namespace attnscope
