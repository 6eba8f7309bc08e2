// Ops of the eager ("unfused") attention at a low precision (see unfused_stages.h).
#include "kernels/cpu/unfused_stages.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attn_check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/precision.h"

namespace attnscope::cpu {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

void times_transposed(int64_t rows, int64_t keys, int64_t ld, int64_t dim, const float* a,
                      const float* xt, float* out) {
  ATTNSCOPE_DCHECK(rows > 0 && keys >= 0 && keys <= ld && dim > 0);
  ATTNSCOPE_DCHECK(a != nullptr && xt != nullptr && out != nullptr);
  for (int64_t jt = 0; jt < tile_count(keys, kTileCols); ++jt) {
    const int64_t j0 = jt * kTileCols;
    gemm_tile(rows, std::min(kTileCols, keys - j0), dim, a, dim, 1, xt + jt * dim * kTileCols,
              kTileCols, out + j0, ld, 1.0f, false);
  }
}

int64_t causal_key_end(const AttnParams& p, const ScoreTile& t) {
  if (!p.causal) return p.seqlen_k;
  return std::clamp<int64_t>(t.i0 + t.rows + causal_shift(p), 0, p.seqlen_k);
}

bool zero_from(const ScoreTile& t, const float* p, int64_t n) {
  for (int64_t r = 0; r < t.rows; ++r) {
    const float* p_r = p + r * t.ld;
    for (int64_t c = n; c < t.cols; ++c) {
      if (p_r[c] != 0) return false;
    }
  }
  return true;
}

void unfused_scores(const HeadContext& x, const ScoreTile& t, const float* q, const float* kt,
                    float* s, float* gf, int64_t keys) {
  ATTNSCOPE_DCHECK(x.params != nullptr && unfused_row_block(*x.params, t));
  ATTNSCOPE_DCHECK(q != nullptr && kt != nullptr && s != nullptr && gf != nullptr);
  ATTNSCOPE_DCHECK(keys >= causal_key_end(*x.params, t) && keys <= t.cols);
  times_transposed(t.rows, keys, t.ld, x.dim, q, kt, s);
  for (int64_t r = 0; r < t.rows; ++r) std::fill(s + r * t.ld + keys, s + r * t.ld + t.cols, 0.0f);
  const Precision pr = x.precision;
  const AttnParams& p = *x.params;
  fill_rows(t.rows, t.cols, t.ld, 1.0f, gf);
  for (int64_t r = 0; r < t.rows; ++r) {
    float* s_r = s + r * t.ld;
    float* gf_r = gf + r * t.ld;
    round_copy(pr, s_r, s_r, t.cols);
    scale_in_place(s_r, x.scale, t.cols);
    round_copy(pr, s_r, s_r, t.cols);
    if (x.softcap > 0) {
      for (int64_t c = 0; c < t.cols; ++c) {
        const float th = round_to(pr, std::tanh(round_to(pr, s_r[c] / x.softcap)));
        s_r[c] = round_to(pr, x.softcap * th);
        gf_r[c] = 1 - th * th;
      }
    }
    if (p.bias != nullptr) {
      const BroadcastStrides& st = p.bias_strides;
      const double* b_r = p.bias + x.b * st.b + x.h * st.h + (t.i0 + r) * st.q;
      for (int64_t c = 0; c < t.cols; ++c) {
        s_r[c] += round_to(pr, static_cast<float>(b_r[c * st.k]));
      }
      round_copy(pr, s_r, s_r, t.cols);
    }
  }
  mask_tile(x, t, s, gf);
}

void unfused_softmax(const HeadContext& x, const ScoreTile& t, const float* s, float* p, float* m,
                     float* l) {
  ATTNSCOPE_DCHECK(x.params != nullptr && unfused_row_block(*x.params, t));
  ATTNSCOPE_DCHECK(s != nullptr && p != nullptr && m != nullptr && l != nullptr);
  for (int64_t r = 0; r < t.rows; ++r) {
    const float* s_r = s + r * t.ld;
    float* p_r = p + r * t.ld;
    m[r] = max_propagating_nan(s_r, t.cols);
    if (m[r] == -kInf && x.safe) {
      std::fill(p_r, p_r + t.cols, 0.0f);
      l[r] = 0;
      continue;
    }
    l[r] = exp_shifted_sum(s_r, m[r], p_r, t.cols);
    scale_in_place(p_r, 1.0f / l[r], t.cols);
    round_copy(x.precision, p_r, p_r, t.cols);
  }
}

const float* unfused_dropout(const HeadContext& x, const ScoreTile& t, const float* p, float* pd) {
  if (!x.dropout) return p;
  ATTNSCOPE_DCHECK(x.params != nullptr && unfused_row_block(*x.params, t) && pd != nullptr);
  apply_dropout(x, t, p, pd, x.dropout_scale);
  for (int64_t r = 0; r < t.rows; ++r)
    round_copy(x.precision, pd + r * t.ld, pd + r * t.ld, t.cols);
  return pd;
}

void unfused_softmax_backward(const HeadContext& x, const ScoreTile& t, const float* p, float* dp,
                              float* d, float* ds) {
  ATTNSCOPE_DCHECK(x.params != nullptr && unfused_row_block(*x.params, t));
  ATTNSCOPE_DCHECK(p != nullptr && dp != nullptr && d != nullptr && ds != nullptr);
  for (int64_t r = 0; r < t.rows; ++r)
    round_copy(x.precision, dp + r * t.ld, dp + r * t.ld, t.cols);
  if (x.dropout) unfused_dropout(x, t, dp, dp);
  for (int64_t r = 0; r < t.rows; ++r) {
    float* dp_r = dp + r * t.ld;
    const float* p_r = p + r * t.ld;
    float* ds_r = ds + r * t.ld;
    d[r] = dot_f32(dp_r, p_r, t.cols);
    for (int64_t c = 0; c < t.cols; ++c) ds_r[c] = p_r[c] * (dp_r[c] - d[r]);
    round_copy(x.precision, ds_r, ds_r, t.cols);
  }
}

void unfused_score_grad(const HeadContext& x, const ScoreTile& t, const float* gf, float* ds) {
  ATTNSCOPE_DCHECK(x.params != nullptr && unfused_row_block(*x.params, t));
  ATTNSCOPE_DCHECK(gf != nullptr && ds != nullptr);
  for (int64_t r = 0; r < t.rows; ++r) {
    float* g_r = ds + r * t.ld;
    const float* gf_r = gf + r * t.ld;
    for (int64_t c = 0; c < t.cols; ++c) g_r[c] *= gf_r[c];
    round_copy(x.precision, g_r, g_r, t.cols);
    scale_in_place(g_r, x.scale, t.cols);
    round_copy(x.precision, g_r, g_r, t.cols);
  }
}

}  // namespace attnscope::cpu
