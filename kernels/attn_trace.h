// Instrumentation of one attention run (DESIGN §4): per-row statistics, per-tile stats of the
// forward and backward, gradient norms, and a provenance code for every non-finite output
// element. The CPU kernels fill a CpuTrace when CpuAttnOptions::trace points at one (outputs
// stay bit-identical); the CUDA kernels write the same TileStats (kernels/cuda CudaTrace).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/attn_types.h"

namespace attnscope {

// Stats of one tile: query rows [qt * tile_rows, ...) x keys [kt * tile_cols, ...) of one
// (batch, head). The unfused kernel materialises whole rows; its stats are cut into the same
// tiles. "Visible" excludes masked scores (bool mask 0, causally hidden, or a -inf bias).
struct TileStats {
  // Max |S| over finite visible scores (0 when none).
  float max_abs_s = 0;
  // Max over finite visible scores of S - m, m being the row max the kernel subtracts before
  // exp (forward: the running max after this tile; fused backward: the forward's m). Above
  // 88.72 the fp32 exp overflows; far below 0 the tile underflows to P = 0. -inf when none.
  float max_exp_arg = -std::numeric_limits<float>::infinity();
  int32_t masked = 0;    // masked entries (all rows * cols of a tile the kernel skipped)
  uint8_t computed = 0;  // 1 when the kernel ran the tile (0: skipped as causally hidden)
  NonfiniteCount s;      // visible scores after score_tile + mask_tile (intentional -inf excluded)
  NonfiniteCount p;      // P: fwd exp(S - m); bwd the recomputed fp32 P; unfused round(softmax)
                         // (undropped; the dropout's 0 * NaN keeps the same non-finite entries)
  NonfiniteCount acc;    // fused fwd: accumulator rows [rows x Dv] after accumulate_pv
  NonfiniteCount dp;     // bwd: dP tile as it enters dS (fused fp32; unfused rounded; dropped
                         // and scaled with dropout, where 0 * Inf turns an Inf into a NaN)
  NonfiniteCount ds;     // bwd: dS tile (unfused: round(P (dP - D)), before softcap and scale)
  // Fused bwd: non-finite entries of the fp32 accumulators after this tile's update: the dQ
  // rows [rows x D] of the tile's chunk partial, dK_j [cols x D] and dV_j [cols x Dv] (summed
  // over the query heads of the kv group so far). Unfused: 0 (no tiled accumulators).
  NonfiniteCount dq, dk, dv;
};

// What the forward records. Shapes: see CpuTrace.
struct ForwardTrace {
  bool valid = false;            // set once a traced forward finished
  std::vector<float> m, l, lse;  // [B, H, Sq] copies of the forward outputs
  std::vector<float> o_max_abs;  // [B, H, Sq] max |O_i| over finite entries
  std::vector<TileStats> tiles;  // [B, H, n_q, n_kv]
  // Provenance codes (read with provenance_at): empty when every element is finite.
  std::vector<Provenance> o_provenance;    // [B, H, Sq, Dv] or empty
  std::vector<Provenance> lse_provenance;  // [B, H, Sq] or empty
};

// What the backward records. Shapes: see CpuTrace.
struct BackwardTrace {
  bool valid = false;                              // set once a traced backward finished
  std::vector<float> d;                            // [B, H, Sq] copy of D
  std::vector<float> dq_row_norm;                  // [B, H, Sq] ||dQ_i||_2 (NaN/inf if non-finite)
  std::vector<float> dk_row_norm, dv_row_norm;     // [B, Hk, Sk] ||dK_j||_2, ||dV_j||_2
  std::vector<double> dq_head_norm;                // [B, H]  ||dQ[b, h]||_2
  std::vector<double> dk_head_norm, dv_head_norm;  // [B, Hk]
  std::vector<TileStats> tiles;                    // [B, H, n_q, n_kv]
  // Provenance codes (read with provenance_at): empty when every element is finite.
  std::vector<Provenance> dq_provenance;  // [B, H, Sq, D] or empty
  std::vector<Provenance> dk_provenance;  // [B, Hk, Sk, D] or empty
  std::vector<Provenance> dv_provenance;  // [B, Hk, Sk, Dv] or empty
};

// The code of element i of a tensor whose provenance codes are `codes` (empty: all finite).
inline Provenance provenance_at(const std::vector<Provenance>& codes, int64_t i) {
  return codes.empty() ? Provenance::finite : codes[static_cast<size_t>(i)];
}

// Everything the instrumentation records. Shapes use B, H, Hk, Sq, Sk, D, Dv of AttnParams and
// n_q = ceil(Sq / tile_rows), n_kv = ceil(Sk / tile_cols). A traced forward resets and fills
// `forward`, a traced backward `backward`; the sizes are those of the latest traced run.
struct CpuTrace {
  int64_t batch = 0, heads = 0, kv_heads = 0, seqlen_q = 0, seqlen_k = 0;
  int64_t head_dim = 0, head_dim_v = 0;
  int64_t tile_rows = 0, tile_cols = 0, q_tiles = 0, kv_tiles = 0;  // Br, Bc, n_q, n_kv
  ForwardTrace forward;
  BackwardTrace backward;

  // Index of tile (b, h, qt, kt) in forward.tiles / backward.tiles.
  int64_t tile_index(int64_t b, int64_t h, int64_t qt, int64_t kt) const {
    return ((b * heads + h) * q_tiles + qt) * kv_tiles + kt;
  }
};

}  // namespace attnscope
