// The backward stages of the tiled CPU attention kernel (see backward_stages.h).
#include "kernels/cpu/backward_stages.h"

#include <algorithm>
#include <limits>

#include "kernels/attn_check.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/precision.h"

namespace attnscope::cpu {

void backward_preprocess(const HeadContext& x, int64_t rows, const float* o, const float* dout,
                         float* d) {
  const int64_t dim_v = x.dim_v;
  ATTNSCOPE_DCHECK(rows > 0 && dim_v > 0 && o != nullptr && dout != nullptr && d != nullptr);
  if (x.bf16_dot) {
    dot_rows_bf16(rows, dim_v, dout, o, d);
  } else {
    dot_rows_f32_in_order(rows, dim_v, dout, o, d);
  }
}

void recompute_p(const HeadContext& x, const ScoreTile& t, const float* s, const float* m,
                 const float* l, float* p, BlockMax* s_max) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t));
  ATTNSCOPE_DCHECK(s != nullptr && m != nullptr && l != nullptr && p != nullptr);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Rows in blocks of up to Br: each row's exponent base and factor, then one call per block.
  float base[kTileRows], factor[kTileRows];
  for (int64_t r0 = 0; r0 < t.rows; r0 += kTileRows) {
    const int64_t rows = std::min<int64_t>(kTileRows, t.rows - r0);
    for (int64_t r = 0; r < rows; ++r) {
      const float m_r = m[r0 + r], l_r = l[r0 + r];
      base[r] = x.p_from_lse ? lse_of(m_r, l_r) : m_r;
      factor[r] = x.p_from_lse ? 1.0f : 1.0f / l_r;
    }
    if (s_max != nullptr && !x.p_from_lse && t.rows <= kTileRows) {
      s_max->finite =
          exp_shifted_scaled_rows_max(rows, t.cols, t.ld, s + r0 * t.ld, base, factor,
                                      p + r0 * t.ld, &s_max->max_shifted, &s_max->max_abs);
    } else {
      if (s_max != nullptr) s_max->finite = false;
      exp_shifted_scaled_rows(rows, t.cols, t.ld, s + r0 * t.ld, base, factor, p + r0 * t.ld);
    }
  }
  for (int64_t r = 0; r < t.rows && x.safe; ++r) {
    if (m[r] == kNegInf) std::fill(p + r * t.ld, p + r * t.ld + t.cols, 0.0f);
  }
}

void accumulate_dv(const HeadContext& x, const ScoreTile& t, const float* p, float* p_lo,
                   const float* dout, float* dv_acc, const Bf16Pairs& paired) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t));
  ATTNSCOPE_DCHECK(p != nullptr && p_lo != nullptr && dout != nullptr && dv_acc != nullptr);
  const float* p_mm = p;  // fp32 P is its own rounding at f32
  Bf16Pairs pairs = paired;
  if (x.bf16_dot && !x.dropout) {
    pairs.a_rounds = true;  // the matmul rounds P as it pairs it
  } else if (x.precision != Precision::f32 || x.dropout) {
    round_rows(x.precision, t.rows, t.cols, t.ld, p, p_lo);
    if (x.dropout) apply_dropout(x, t, p_lo, p_lo, 1.0f);
    p_mm = p_lo;
  }
  tile_matmul(x, t.cols, x.dim_v, t.rows, p_mm, 1, t.ld, dout, x.dim_v, dv_acc, x.dim_v, 1.0f, true,
              pairs);
}

void compute_dp(const HeadContext& x, const ScoreTile& t, const float* dout, const float* vt,
                int64_t ldvt, float* dp, const Bf16Pairs& paired) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t));
  ATTNSCOPE_DCHECK(dout != nullptr && (vt != nullptr || paired.b != nullptr) && dp != nullptr &&
                   ldvt >= t.cols);
  tile_matmul(x, t.rows, t.cols, x.dim_v, dout, x.dim_v, 1, vt, ldvt, dp, t.ld, 1.0f, false,
              paired);
  if (x.dropout) apply_dropout(x, t, dp, dp, x.dropout_scale);
}

float compute_ds(const HeadContext& x, const ScoreTile& t, const float* p, const float* dp,
                 const float* d, const float* gf, float* ds) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t));
  ATTNSCOPE_DCHECK(p != nullptr && dp != nullptr && d != nullptr && gf != nullptr && ds != nullptr);
  return softmax_grad_rows(t.rows, t.cols, t.ld, p, dp, d, gf, x.precision, ds);
}

void accumulate_dq(const HeadContext& x, const ScoreTile& t, const float* ds, const float* k,
                   float* dq_acc, const Bf16Pairs& paired) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t));
  ATTNSCOPE_DCHECK(ds != nullptr && k != nullptr && dq_acc != nullptr);
  tile_matmul(x, t.rows, x.dim, t.cols, ds, t.ld, 1, k, x.dim, dq_acc, x.dim, x.scale, true,
              paired);
}

void accumulate_dk(const HeadContext& x, const ScoreTile& t, const float* ds, const float* q,
                   float* dk_acc, const Bf16Pairs& paired) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t));
  ATTNSCOPE_DCHECK(ds != nullptr && q != nullptr && dk_acc != nullptr);
  tile_matmul(x, t.cols, x.dim, t.rows, ds, 1, t.ld, q, x.dim, dk_acc, x.dim, x.scale, true,
              paired);
}

void backward_postprocess(const HeadContext& x, const float* acc, int64_t n, float* out) {
  ATTNSCOPE_DCHECK(n >= 0 && (n == 0 || (acc != nullptr && out != nullptr)));
  round_copy(x.precision, acc, out, n);
}

void backward_postprocess_dv(const HeadContext& x, const float* acc, int64_t n, float* out) {
  ATTNSCOPE_DCHECK(n >= 0 && (n == 0 || (acc != nullptr && out != nullptr)));
  if (!x.dropout) {
    round_copy(x.precision, acc, out, n);
    return;
  }
  for (int64_t e = 0; e < n; ++e) out[e] = acc[e] * x.dropout_scale;
  round_copy(x.precision, out, out, n);
}

}  // namespace attnscope::cpu
