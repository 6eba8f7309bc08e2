// Internal interface between the public entry points (fused_attention.cpp) and the four CPU
// drivers: inputs already rounded to the emulated precision, plus shared preparation helpers.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/attn_params.h"
#include "kernels/cpu/buffer.h"
#include "kernels/cpu/cancel_poll.h"
#include "kernels/cpu/forward_stages.h"
#include "kernels/cpu/fused_attention.h"
#include "kernels/cpu/tile_math.h"

namespace attnscope::cpu {

class TraceRecorder;
class PooledCells;

// Inputs rounded to the emulated precision: views of the caller's arrays (f32) or of the
// owned copies. dout is never null once prepared for a backward (ones when absent).
struct PreparedInputs {
  const float* q = nullptr;     // [B, H, Sq, D]
  const float* k = nullptr;     // [B, Hk, Sk, D]
  const float* v = nullptr;     // [B, Hk, Sk, Dv]
  const float* dout = nullptr;  // [B, H, Sq, Dv]
  Buffer<float> q_copy, k_copy, v_copy, dout_copy;
  // The largest magnitude of each row of the prepared arrays (row_maxima; not finite where the
  // row holds a NaN or inf), from the pass that checks the rounding: q_max and dout_max
  // [B * H * Sq], k_max and v_max [B * Hk * Sk]. The finite checks and the trace read these
  // instead of scanning the inputs again. q_max is empty in an untraced fp32 forward (no one
  // reads it there), dout_max in a forward.
  std::vector<float> q_max, k_max, v_max, dout_max;
};

// Checks sizes and pointers; throws std::invalid_argument naming the offending field.
void validate(const AttnParams& params, const CpuAttnInputs& inputs);

PreparedInputs prepare_inputs(const AttnParams& params, const CpuAttnInputs& inputs, bool backward,
                              bool traced, int threads);

// Whether rows [row0, row0 + rows) of a prepared input are all finite, from its row maxima.
bool rows_finite(const std::vector<float>& row_max, int64_t row0, int64_t rows);

// Number of tiles of size `tile` covering n.
inline int64_t tile_count(int64_t n, int64_t tile) {
  return (n + tile - 1) / tile;
}

// K^T (or V^T) in kv tiles: x holds `heads` matrices [Sk x dim]; the result holds, per head
// and kv tile jt, the block [dim x Bc] with element (e, c) = x[jt * Bc + c][e] (columns past
// the last key are left 0). Tile jt of head g starts at (g * tile_count(Sk, Bc) + jt) * dim * Bc.
Buffer<float> transpose_kv_tiles(const float* x, int64_t heads, int64_t sk, int64_t dim,
                                 int threads);

// The bf16 pairs (gemm_bf16.h) of the kv tiles of `heads` matrices [Sk x dim] as the B operand
// of the forward's matmuls, for HeadContext::bf16_dot; tile jt of head g at (g * n_kv + jt)
// times the block size. pair_kt_tiles: of each tile's transpose (K^T in S = Q K^T, the pairs
// of transpose_kv_tiles' block). pair_v_tiles: of each tile's rows (V in P V).
int64_t kt_pairs_block(int64_t dim);
int64_t v_pairs_block(int64_t dim);
Buffer<uint32_t> pair_kt_tiles(const float* k, int64_t heads, int64_t sk, int64_t dim, int threads);
Buffer<uint32_t> pair_v_tiles(const float* v, int64_t heads, int64_t sk, int64_t dim, int threads);

// Per kv tile [B * Hk][n_kv]: 1 when its K and V rows are all finite (from the row maxima). A
// causally hidden tile is skipped only then, so that 0 * NaN still poisons the output exactly
// as in the reference.
std::vector<uint8_t> finite_kv_tiles(const AttnParams& params, const PreparedInputs& in);

// Chunks of kv tiles per (batch, kv head) in the fused backward: chunk c accumulates dQ of kv
// tiles c, c + chunks, ... into its own fp32 partial; the partials are summed in chunk order.
// Depends only on the shape (dq_elements = B * H * Sq * D).
int64_t kv_chunks(int64_t kv_groups, int64_t n_kv, int64_t dq_elements);

// Operands of one (batch, query head) for the fused forward: q [Sq x D] of the head, kt the
// K^T tiles of its kv head (transpose_kv_tiles layout: n_kv blocks [D x Bc]), v [Sk x Dv] of
// the kv head, kv_finite [n_kv] (finite_kv_tiles of the kv head). kt_pairs, v_pairs (null, or
// with bf16_dot both): pair_kt_tiles and pair_v_tiles of the kv head; kt may be null with them.
struct FusedHeadOperands {
  const float* q = nullptr;
  const float* kt = nullptr;
  const float* v = nullptr;
  const uint8_t* kv_finite = nullptr;
  const uint32_t* kt_pairs = nullptr;
  const uint32_t* v_pairs = nullptr;
};

// Per-worker buffers of the fused forward.
struct ForwardScratch {
  std::vector<float> s, p;        // [Br, Bc]
  std::vector<float> m, l;        // [Br]
  std::vector<float> acc;         // [Br, Dv]
  std::vector<uint32_t> q_pairs;  // [Br, ceil(D / 2)]: pair_rows of the q tile (with kt_pairs)
  explicit ForwardScratch(int64_t dim_v);
};

// The fused forward of q tile qt of head (x.b, x.h) over every kv tile (causally hidden tiles
// with a -inf fill and finite K / V are skipped). o [rows x Dv], lse, m, l [rows] point at the
// tile's first row. o null: the statistics alone (m, l, LSE; the same bits), without P V (op.v
// may be null then, and rec must be). rec (nullable) records each tile; cancel is checked
// before each kv tile.
// pooled (nullable, S selected alone): receives the S of every tile of the q tile that overlaps
// its window, skipped ones included.
void fused_forward_q_tile(const HeadContext& x, int64_t qt, const FusedHeadOperands& op,
                          ForwardScratch& w, float* o, float* lse, float* m, float* l,
                          TraceRecorder* rec, const CancelPoll& cancel = CancelPoll(),
                          PooledCells* pooled = nullptr, int worker = 0);

// Tile buffers of the fused backward, [Br x Bc] each (row stride Bc).
struct BackwardTileBuffers {
  std::vector<float> s, gf, p, p_lo, dp, ds;
  // compute_ds's answer for the last tile: max |dS| with dP and dS finite; +inf otherwise or
  // before that stage.
  float ds_max_abs = std::numeric_limits<float>::infinity();
  BackwardTileBuffers();
};

// The score-shaped intermediates in stage order; `last` names the last one a caller needs.
enum class TileStage : uint8_t { s, p, dp, ds };

// The fused backward's intermediates of tile t in stage order, up to `last`: score_tile +
// mask_tile (s, gf), recompute_p (p), compute_dp (dp), compute_ds (ds). q_tile [rows x D], kt the
// tile's K^T [D x Bc] and vt its V^T [Dv x Bc] (row stride Bc), do_tile [rows x Dv]; m, l, d
// at the tile's rows (read from the stage that needs them on); s_paired and dp_paired: the
// operands of S's and dP's matmuls already paired (forward_stages.h, tile_matmul; kt / vt may
// then be null); s_max: recompute_p's.
void fused_backward_intermediates(const HeadContext& x, const ScoreTile& t, const float* q_tile,
                                  const float* kt, const float* do_tile, const float* vt,
                                  const float* m, const float* l, const float* d,
                                  BackwardTileBuffers& w, TileStage last = TileStage::ds,
                                  const Bf16Pairs& s_paired = {}, const Bf16Pairs& dp_paired = {},
                                  BlockMax* s_max = nullptr);

// Whether the rows of a q tile are clean for the backward: q and dO finite (the caller's
// `inputs_finite`), D finite and every row's P exactly 0 wherever masked (finite m and l, or a
// safe empty row). d, m, l: [rows].
bool q_tile_clean(const HeadContext& x, int64_t rows, bool inputs_finite, const float* d,
                  const float* m, const float* l);

// The fused backward skips tile t when skipping changes nothing: causally hidden, -inf fill,
// clean kv tile (finite K, V) and clean q tile.
bool backward_skips(const HeadContext& x, const ScoreTile& t, bool kv_clean, bool q_clean);

// The drivers check `cancel` before every tile (fused) or row block (unfused) and throw
// KernelCancelled out of it.
// pooled (nullable): receives every tile of its head that overlaps its window (the forward's:
// S alone). The fused forward with out.o null computes the statistics alone
// (fused_forward_q_tile).
void fused_forward(const AttnParams& params, const PreparedInputs& in, int threads,
                   const CpuForwardOutputs& out, TraceRecorder* rec, PooledCells* pooled,
                   const CancelPoll& cancel);
void fused_backward(const AttnParams& params, const PreparedInputs& in, const CpuForwardView& fwd,
                    int threads, const CpuBackwardOutputs& out, TraceRecorder* rec,
                    PooledCells* pooled, const CancelPoll& cancel);
void unfused_forward(const AttnParams& params, const PreparedInputs& in, int threads,
                     const CpuForwardOutputs& out, TraceRecorder* rec, const CancelPoll& cancel);
void unfused_backward(const AttnParams& params, const PreparedInputs& in, int threads,
                      const CpuBackwardOutputs& out, TraceRecorder* rec, PooledCells* pooled,
                      const CancelPoll& cancel);

}  // namespace attnscope::cpu
