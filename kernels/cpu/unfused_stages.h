// Ops of the eager ("unfused") attention emulated at a low precision, each output rounded as
// when `dropout(softmax(q @ k.T * scale).masked_fill(...)) @ v` and its autograd run in fp16 /
// bf16. Autograd saves the softmax output, so the backward always uses that P (BackwardP is
// ignored).
// They work on row blocks t of Br queries against all Sk keys (t.j0 = 0, t.cols = t.ld = Sk).
#pragma once

#include <cstdint>

#include "kernels/cpu/forward_stages.h"

namespace attnscope::cpu {

// out = A X^T for keys [0, keys), out [rows x ld] (columns from `keys` on untouched), A [rows x
// dim] (row stride dim), X^T of one head in the transpose_kv_tiles layout.
void times_transposed(int64_t rows, int64_t keys, int64_t ld, int64_t dim, const float* a,
                      const float* xt, float* out);

// Scores of block t: s = round(round(q.k) * scale), softcap as round(cap * round(tanh(round(s /
// cap)))), s = round(s + round(bias)), masked s = the rounded fill. gf = d s / d(scale q.k) from
// the rounded tanh, 0 where masked. q [rows x D], kt: K^T of the head in kv tiles. q.k is
// multiplied out for keys [0, keys) only: causality hides every key from `keys` on from every
// row of t (causal_key_end), and masked_fill replaces a hidden score whatever it was.
void unfused_scores(const HeadContext& x, const ScoreTile& t, const float* q, const float* kt,
                    float* s, float* gf, int64_t keys);

// Keys [0, n) that causality leaves visible to some row of t (Sk without causality).
int64_t causal_key_end(const AttnParams& p, const ScoreTile& t);

// Whether P of rows t is exactly 0 on every key from n on: a matmul by P may then stop at key
// n, the later terms being zeros where the other operand is finite.
bool zero_from(const ScoreTile& t, const float* p, int64_t n);

// Row softmax in fp32 from rounded scores, output rounded: p = round(exp(s - m) / l); m, l per
// row. A row of -inf gives p = 0 (l = 0) under MaskFill::safe, NaN otherwise.
void unfused_softmax(const HeadContext& x, const ScoreTile& t, const float* s, float* p, float* m,
                     float* l);

// torch.dropout of a row block: pd = round(p * noise), noise = x.dropout_scale (round(1 / (1 -
// p))) where kept and 0 where dropped (0 * NaN stays NaN). Returns pd, or p itself without
// dropout (pd untouched). p, pd [rows x Sk].
const float* unfused_dropout(const HeadContext& x, const ScoreTile& t, const float* p, float* pd);

// Dropout and softmax backward of a row block, op by op: dP = round(dP) in place (dO V^T),
// with dropout then dP = round(dP * noise) (the dP the softmax backward receives, the one the
// trace and head matrices show), D = rowsum(dP * P) in fp32 (d per row), ds = round(P (dP - D))
// [rows x Sk] with P the undropped softmax output.
void unfused_softmax_backward(const HeadContext& x, const ScoreTile& t, const float* p, float* dp,
                              float* d, float* ds);

// Gradient of scale * q.k from ds, in place: g = round(round(ds * gf) * scale) (softcap / mask
// derivative, then the scale multiply).
void unfused_score_grad(const HeadContext& x, const ScoreTile& t, const float* gf, float* ds);

}  // namespace attnscope::cpu
