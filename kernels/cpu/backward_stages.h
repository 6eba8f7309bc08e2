// Stages of the FlashAttention-2 backward, named as in the algorithm so a stepper can walk
// them 1:1: backward_preprocess (D) per head; then for each kv tile j (outer) and q tile i
// (inner): score_tile + mask_tile (forward_stages.h) -> recompute_p -> accumulate_dv ->
// compute_dp -> compute_ds -> accumulate_dq -> accumulate_dk; then backward_postprocess
// (backward_postprocess_dv for dV).
//
// Forward differentiated, per row i: s_ij = f(scale * q_i.k_j) (softcap, bias, mask),
// p_ij = softmax_j(s_ij), o_i = sum_j p_ij z_ij v_j (z the dropout factor, keep / (1 - p); 1
// without dropout), loss = sum_i dO_i . o_i. Hence
//   dv_j = sum_i p_ij z_ij dO_i,  dp_ij = z_ij dO_i.v_j,  D_i = sum_j p_ij dp_ij = dO_i . o_i,
//   ds_ij = p_ij (dp_ij - D_i) f'_ij,  dq_i = scale sum_j ds_ij k_j,  dk_j = scale sum_i ds_ij q_i.
#pragma once

#include <cstdint>

#include "kernels/cpu/forward_stages.h"
#include "kernels/cpu/tile_math.h"

namespace attnscope::cpu {

// D_r = sum_c dO[r, c] * O[r, c] in fp32 for rows r < rows, summed as the kernel's matmuls sum
// (tile_matmul); o, dout [rows x Dv].
void backward_preprocess(const HeadContext& x, int64_t rows, const float* o, const float* dout,
                         float* d);

// The backward's P in fp32, undropped (m, l indexed by tile row):
//   BackwardP::saved:    P = exp(S - m) / l, the forward's probabilities; exact even when |m| is
//                        so large that fp32 LSE absorbs log l (a fully masked row under -1e9).
//   BackwardP::from_lse: P = exp(S - LSE) with LSE = lse_of(m, l), the fp32 value the forward
//                        stored, as FA2 recomputes it; 1 on every key of a row of one huge
//                        finite score (LSE = m there).
// A row with m = -inf is 0 under MaskFill::safe and NaN otherwise (l is NaN), as in the forward.
// With s_max, also finite_block_max of s against m from the exp pass where P is taken against m
// (saved) in one block of rows (t.rows <= Br); s_max->finite is false otherwise.
void recompute_p(const HeadContext& x, const ScoreTile& t, const float* s, const float* m,
                 const float* l, float* p, BlockMax* s_max = nullptr);

// dV_j += round(P o keep)^T dO_i: p_lo receives round(P o keep) (same layout as p; untouched
// without dropout at f32 and with bf16_dot, whose matmul rounds P as it pairs it), dout holds
// rows t.i0.. of dO [rows x Dv], dv_acc [cols x Dv] in fp32. The 1 / (1 - p) of dropout waits for
// backward_postprocess_dv.
void accumulate_dv(const HeadContext& x, const ScoreTile& t, const float* p, float* p_lo,
                   const float* dout, float* dv_acc, const Bf16Pairs& paired = {});

// dP = Z o (dO_i V_j^T) in fp32, Z = keep * dropout_scale (1 without dropout): the dP that
// enters dS, and the one the stepper and the head matrices show. dout [rows x Dv] (row stride
// Dv), vt column t.j0 of V^T [Dv x cols] (row stride ldvt; null where paired.b holds its
// pairs), dp like the score tile.
void compute_dp(const HeadContext& x, const ScoreTile& t, const float* dout, const float* vt,
                int64_t ldvt, float* dp, const Bf16Pairs& paired = {});

// dS = round(P * (dP - D) * gf) with fp32 P, dP and D (d indexed by tile row); gf is the
// softcap derivative, 0 at masked scores. dS is the low-precision operand of both matmuls.
// Returns the largest |dS| when every dP and dS of the tile is finite, +inf otherwise (the trace
// then need not scan them, and bounds the accumulators by it).
float compute_ds(const HeadContext& x, const ScoreTile& t, const float* p, const float* dp,
                 const float* d, const float* gf, float* ds);

// dQ_i += scale * dS K_j in fp32: k holds rows t.j0.. of K [cols x D], dq_acc [rows x D].
void accumulate_dq(const HeadContext& x, const ScoreTile& t, const float* ds, const float* k,
                   float* dq_acc, const Bf16Pairs& paired = {});

// dK_j += scale * dS^T Q_i in fp32: q holds rows t.i0.. of Q [rows x D], dk_acc [cols x D].
void accumulate_dk(const HeadContext& x, const ScoreTile& t, const float* ds, const float* q,
                   float* dk_acc, const Bf16Pairs& paired = {});

// Stores an fp32 accumulator of n elements rounded once to the precision: out = round(acc)
// (out may be acc itself, as with backward_postprocess_dv).
void backward_postprocess(const HeadContext& x, const float* acc, int64_t n, float* out);

// Stores dV: out = round(acc * dropout_scale) with dropout (FA2 scales its fp32 dV accumulator
// by rp_dropout before the store), round(acc) without.
void backward_postprocess_dv(const HeadContext& x, const float* acc, int64_t n, float* out);

}  // namespace attnscope::cpu
