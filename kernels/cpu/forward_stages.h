// Stages of the FlashAttention-2 forward on one (batch, head, q-tile), named as in the
// algorithm so a stepper can walk them 1:1: score_tile -> mask_tile -> online_softmax_update
// -> accumulate_pv for every kv tile, then forward_epilogue. score_tile and mask_tile also
// serve the backward's recomputation and the unfused kernel.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/attn_params.h"
#include "kernels/attn_types.h"
#include "kernels/cpu/fused_attention.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/tile_math.h"

namespace attnscope::cpu {

// What every stage needs to know about one (batch b, query head h).
struct HeadContext {
  const AttnParams* params = nullptr;
  int64_t b = 0, h = 0;
  int64_t dim = 0, dim_v = 0;            // D, Dv
  Precision precision = Precision::f32;  // values are rounded to this; f32 = no rounding
  float scale = 1, softcap = 0;
  float fill = 0;        // masked score value: fp32 in fused, rounded to precision in unfused
  bool safe = false;     // MaskFill::safe: a row with every score -inf yields O = 0
  bool dropout = false;  // AttnParams::dropout_keep is set
  // Factor of a kept entry. Fused: FA2's rp_dropout = 1 / (1 - p) in fp32, applied to O (with
  // 1 / l), dP and dV; unfused: the dropout noise value round(1 / (1 - p)) in the precision.
  float dropout_scale = 1;
  bool p_from_lse = false;  // fused with BackwardP::from_lse (the unfused kernel is eager)
  // Fused bf16 under the set "avx512bf16" (cpu_isa.h): matmuls by gemm_tile_bf16, D by
  // dot_rows_bf16.
  bool bf16_dot = false;
};

// f64 is emulated as f32: the CPU kernels compute in fp32.
Precision emulated_precision(Precision p);

HeadContext make_head_context(const AttnParams& params, Mode mode, int64_t b, int64_t h);

// A block of a score-shaped [Sq, Sk] matrix: element (r, c) is query t.i0 + r, key t.j0 + c,
// stored at data[r * ld + c]; r < rows, c < cols.
struct ScoreTile {
  int64_t i0 = 0, j0 = 0, rows = 0, cols = 0, ld = 0;
};

// The contract every stage states on its tile t (ATTNSCOPE_DCHECK at entry): a non-empty block
// inside [0, Sq) x [0, Sk) whose rows fit the row stride.
inline bool tile_in_bounds(const AttnParams& p, const ScoreTile& t) {
  return t.i0 >= 0 && t.j0 >= 0 && t.rows > 0 && t.cols > 0 && t.i0 + t.rows <= p.seqlen_q &&
         t.j0 + t.cols <= p.seqlen_k && t.cols <= t.ld;
}

// A tile of the fused kernels: at most Br x Bc, row stride Bc (the per-worker tile buffers).
inline bool fused_tile(const AttnParams& p, const ScoreTile& t) {
  return tile_in_bounds(p, t) && t.rows <= attnscope::kTileRows && t.cols <= attnscope::kTileCols &&
         t.ld == attnscope::kTileCols;
}

// A row block of the unfused kernel: queries t.i0.. against every key (t.j0 = 0, t.cols = t.ld
// = Sk).
inline bool unfused_row_block(const AttnParams& p, const ScoreTile& t) {
  return tile_in_bounds(p, t) && t.j0 == 0 && t.cols == p.seqlen_k && t.ld == p.seqlen_k;
}

// True when causality hides every key of the tile from every query of it.
bool causally_hidden(const AttnParams& params, const ScoreTile& t);

// True when a masked score contributes exactly 0 to softmax sums (the fill is -inf), so fully
// masked tiles may be skipped if no NaN/Inf input could leak through them.
bool fill_is_neg_inf(const HeadContext& x);

// The kernel's matmul of one tile, gemm_tile's arguments (tile_math.h): gemm_tile_bf16
// (gemm_bf16.h) where x.bf16_dot, which reads the operands `paired` holds from there; else
// gemm_tile. Every stage below that multiplies takes such a `paired` for its matmul: a driver
// pairs its loop-invariant operands once (the same bits).
void tile_matmul(const HeadContext& x, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                 float alpha, bool accumulate, const Bf16Pairs& paired = {});

// S = scale * Q K^T in fp32, then softcap (s = cap * tanh(s / cap)), then + bias (rounded to
// the precision). q: rows t.i0.. of Q [rows x D] (row stride D); kt: column t.j0 of K^T
// [D x cols] (row stride ldkt; null where paired.b holds its pairs). gf (nullable, same layout as
// s): d s / d(scale q.k), i.e. 1 - tanh^2 with softcap, else 1.
void score_tile(const HeadContext& x, const ScoreTile& t, const float* q, const float* kt,
                int64_t ldkt, float* s, float* gf, const Bf16Pairs& paired = {});

// Sets masked scores (bool mask 0 or causally hidden) to x.fill and their gf to 0 (the fill is
// a constant: no gradient flows to q or k, yet 0 * NaN stays NaN as in the reference).
void mask_tile(const HeadContext& x, const ScoreTile& t, float* s, float* gf);

// LSE = m + log l in fp32, as the forward stores it (forward_epilogue) and a from_lse backward
// recomputes it.
inline float lse_of(float m, float l) {
  return m + std::log(l);
}

// Dropout of tile t: out(r, c) = p(r, c) * (keep(i, j) ? kept : 0) with keep the keep-mask of
// head (x.b, x.h); p and out like the score tile (they may alias). A dropped entry becomes
// exactly 0 unless p is NaN / Inf (0 * NaN stays NaN, as in the reference). Only with x.dropout.
void apply_dropout(const HeadContext& x, const ScoreTile& t, const float* p, float* out,
                   float kept);

// Online softmax over one more kv tile, per row r (all fp32):
//   m_new = max(m, rowmax S)        (NaN if a score is NaN, as torch.max: the row is NaN)
//   alpha = exp(m - m_new);  P = exp(S - m_new);  l = alpha * l + rowsum P;  acc *= alpha
// With m_new = -inf (nothing visible yet) the exponent base is 0, so P = 0 and alpha = 0.
// P is the low-precision matmul operand, stored rounded to x.precision (l sums it unrounded);
// it stays fp32 where the statistics alone are wanted (acc null) or where x.bf16_dot, whose
// matmul rounds it as it pairs it (accumulate_pv): the same bits go into P V.
// Invariant after kv tile j: m = max of the scores of keys < (j + 1) Bc, l = sum over those
// keys of exp(s - m), acc = sum of exp(s - m) v (acc [rows x Dv], row stride dim_v).
// s_max: online_softmax_rows's.
void online_softmax_update(const HeadContext& x, const ScoreTile& t, const float* s, float* p,
                           float* m, float* l, float* acc, int64_t dim_v,
                           BlockMax* s_max = nullptr);

// acc += (P o keep) V: P comes from online_softmax_update (rounded, or rounded here as the bf16
// matmul pairs it); with dropout its dropped entries are zeroed in place (m and l stay those of
// the undropped P, and 1 / (1 - p) waits for forward_epilogue), v holds rows t.j0.. of V
// [cols x Dv] (row stride Dv), acc [rows x Dv].
void accumulate_pv(const HeadContext& x, const ScoreTile& t, float* p, const float* v, float* acc,
                   const Bf16Pairs& paired = {});

// Final per-row outputs: O = round(acc * (1 / l)) (with dropout round(acc * (1 / l *
// dropout_scale)), FA2's epilogue), LSE = lse_of(m, l), m and l as accumulated. A row
// with m = -inf (every score -inf) gives O = acc = sum 0 * v (0, NaN where a value is NaN /
// Inf, as PyTorch's P @ V), l = 0, LSE = -inf under MaskFill::safe and O = l = LSE = NaN
// otherwise (exp(-inf - -inf) in the reference). o [rows x Dv].
void forward_epilogue(const HeadContext& x, int64_t rows, const float* m, const float* l,
                      const float* acc, float* o, float* lse, float* m_out, float* l_out);

}  // namespace attnscope::cpu
