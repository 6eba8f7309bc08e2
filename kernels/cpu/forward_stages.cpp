// The forward stages of the tiled CPU attention kernel (see forward_stages.h).
#include "kernels/cpu/forward_stages.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attn_check.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/precision.h"

namespace attnscope::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace

Precision emulated_precision(Precision p) {
  return p == Precision::f64 ? Precision::f32 : p;
}

HeadContext make_head_context(const AttnParams& params, Mode mode, int64_t b, int64_t h) {
  ATTNSCOPE_DCHECK(b >= 0 && b < params.batch && h >= 0 && h < params.heads);
  ATTNSCOPE_DCHECK(params.kv_heads > 0 && params.heads % params.kv_heads == 0);
  HeadContext x;
  x.params = &params;
  x.b = b;
  x.h = h;
  x.dim = params.head_dim;
  x.dim_v = params.head_dim_v;
  x.precision = emulated_precision(params.precision);
  x.scale = static_cast<float>(params.scale);
  x.softcap = static_cast<float>(params.softcap);
  const float fill = static_cast<float>(mask_fill_value(params.mask_fill, x.precision));
  x.fill = mode == Mode::unfused ? round_to(x.precision, fill) : fill;
  x.safe = params.mask_fill == MaskFill::safe;
  x.dropout = params.dropout_keep != nullptr;
  if (x.dropout) {
    // FA2: p_keep = 1.f - p, rp_dropout = 1.f / p_keep. torch.dropout divides its noise tensor
    // (of the input's dtype) by the double 1 - p, computed in fp32 and rounded to the dtype.
    x.dropout_scale =
        mode == Mode::fused
            ? 1.0f / (1.0f - static_cast<float>(params.dropout_p))
            : round_to(x.precision, 1.0f / static_cast<float>(1.0 - params.dropout_p));
  }
  x.p_from_lse = mode == Mode::fused && params.backward_p == BackwardP::from_lse;
  x.bf16_dot = mode == Mode::fused && x.precision == Precision::bf16 && bf16_dot_products();
  return x;
}

bool causally_hidden(const AttnParams& params, const ScoreTile& t) {
  return params.causal && t.j0 > t.i0 + t.rows - 1 + causal_shift(params);
}

bool fill_is_neg_inf(const HeadContext& x) {
  return x.fill == -kInf;
}

void tile_matmul(const HeadContext& x, int64_t m, int64_t n, int64_t k, const float* a,
                 int64_t a_rs, int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                 float alpha, bool accumulate, const Bf16Pairs& paired) {
  if (x.bf16_dot) {
    gemm_tile_bf16(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, alpha, accumulate, paired);
  } else {
    gemm_tile(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, alpha, accumulate);
  }
}

void score_tile(const HeadContext& x, const ScoreTile& t, const float* q, const float* kt,
                int64_t ldkt, float* s, float* gf, const Bf16Pairs& paired) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t));
  ATTNSCOPE_DCHECK(q != nullptr && (kt != nullptr || paired.b != nullptr) && s != nullptr &&
                   ldkt >= t.cols);
  tile_matmul(x, t.rows, t.cols, x.dim, q, x.dim, 1, kt, ldkt, s, t.ld, x.scale, false, paired);
  const AttnParams& p = *x.params;
  if (gf != nullptr && x.softcap <= 0) fill_rows(t.rows, t.cols, t.ld, 1.0f, gf);
  for (int64_t r = 0; r < t.rows; ++r) {
    float* s_r = s + r * t.ld;
    float* gf_r = gf != nullptr ? gf + r * t.ld : nullptr;
    if (x.softcap > 0) {
      for (int64_t c = 0; c < t.cols; ++c) {
        const float th = std::tanh(s_r[c] / x.softcap);
        s_r[c] = x.softcap * th;
        if (gf_r != nullptr) gf_r[c] = 1 - th * th;
      }
    }
    if (p.bias != nullptr) {
      const BroadcastStrides& st = p.bias_strides;
      const double* b_r = p.bias + x.b * st.b + x.h * st.h + (t.i0 + r) * st.q + t.j0 * st.k;
      for (int64_t c = 0; c < t.cols; ++c) {
        s_r[c] += round_to(x.precision, static_cast<float>(b_r[c * st.k]));
      }
    }
  }
}

void mask_tile(const HeadContext& x, const ScoreTile& t, float* s, float* gf) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t) && s != nullptr);
  const AttnParams& p = *x.params;
  if (!p.causal && p.mask == nullptr) return;
  const int64_t shift = causal_shift(p);
  for (int64_t r = 0; r < t.rows; ++r) {
    float* s_r = s + r * t.ld;
    float* gf_r = gf != nullptr ? gf + r * t.ld : nullptr;
    const auto hide = [&](int64_t c) {
      s_r[c] = x.fill;
      if (gf_r != nullptr) gf_r[c] = 0;
    };
    if (p.mask != nullptr) {
      const BroadcastStrides& st = p.mask_strides;
      const uint8_t* m_r = p.mask + x.b * st.b + x.h * st.h + (t.i0 + r) * st.q + t.j0 * st.k;
      for (int64_t c = 0; c < t.cols; ++c) {
        if (m_r[c * st.k] == 0) hide(c);
      }
    }
    if (p.causal) {
      // Key j is hidden from query i iff j > i + shift.
      const int64_t first_hidden = std::max<int64_t>(0, t.i0 + r + shift + 1 - t.j0);
      for (int64_t c = first_hidden; c < t.cols; ++c) hide(c);
    }
  }
}

void apply_dropout(const HeadContext& x, const ScoreTile& t, const float* p, float* out,
                   float kept) {
  ATTNSCOPE_DCHECK(x.params != nullptr && tile_in_bounds(*x.params, t));
  ATTNSCOPE_DCHECK(x.dropout && x.params->dropout_keep != nullptr && p != nullptr &&
                   out != nullptr);
  const AttnParams& prm = *x.params;
  const BroadcastStrides& st = prm.dropout_strides;
  for (int64_t r = 0; r < t.rows; ++r) {
    const uint8_t* k_r =
        prm.dropout_keep + x.b * st.b + x.h * st.h + (t.i0 + r) * st.q + t.j0 * st.k;
    const float* p_r = p + r * t.ld;
    float* out_r = out + r * t.ld;
    for (int64_t c = 0; c < t.cols; ++c) out_r[c] = p_r[c] * (k_r[c * st.k] != 0 ? kept : 0.0f);
  }
}

void online_softmax_update(const HeadContext& x, const ScoreTile& t, const float* s, float* p,
                           float* m, float* l, float* acc, int64_t dim_v, BlockMax* s_max) {
  ATTNSCOPE_DCHECK(t.rows > 0 && t.rows <= attnscope::kTileRows && t.cols > 0 && t.cols <= t.ld);
  ATTNSCOPE_DCHECK(s != nullptr && p != nullptr && m != nullptr && l != nullptr);
  ATTNSCOPE_DCHECK(dim_v >= 0 && (acc != nullptr || dim_v == 0));  // acc null: statistics only
  // P stays fp32 where nothing reads it (statistics alone) or where accumulate_pv's bf16 matmul
  // rounds it as it pairs it: the bits of P rounded here.
  const bool rounded = acc != nullptr && !x.bf16_dot;
  online_softmax_rows(t.rows, t.cols, t.ld, s, p, m, l, acc, dim_v,
                      rounded ? x.precision : Precision::f32, s_max);
}

void accumulate_pv(const HeadContext& x, const ScoreTile& t, float* p, const float* v, float* acc,
                   const Bf16Pairs& paired) {
  ATTNSCOPE_DCHECK(x.params != nullptr && fused_tile(*x.params, t));
  ATTNSCOPE_DCHECK(p != nullptr && v != nullptr && acc != nullptr);
  if (x.dropout) apply_dropout(x, t, p, p, 1.0f);  // times 1 or 0: exact, rounded or not
  Bf16Pairs pv = paired;
  pv.a_rounds = x.bf16_dot;  // P is fp32 there (online_softmax_update)
  tile_matmul(x, t.rows, x.dim_v, t.cols, p, t.ld, 1, v, x.dim_v, acc, x.dim_v, 1.0f, true, pv);
}

void forward_epilogue(const HeadContext& x, int64_t rows, const float* m, const float* l,
                      const float* acc, float* o, float* lse, float* m_out, float* l_out) {
  ATTNSCOPE_DCHECK(rows > 0 && rows <= attnscope::kTileRows);
  ATTNSCOPE_DCHECK(m != nullptr && l != nullptr && acc != nullptr && o != nullptr);
  ATTNSCOPE_DCHECK(lse != nullptr && m_out != nullptr && l_out != nullptr);
  for (int64_t r = 0; r < rows; ++r) {
    float* o_r = o + r * x.dim_v;
    m_out[r] = m[r];
    if (m[r] == -kInf) {
      // Every score -inf: P was 0 on every key, so acc = sum 0 * v (0, or NaN where a value
      // is non-finite); `safe` stores that as O, otherwise the row is NaN.
      const float* acc_r = acc + r * x.dim_v;
      for (int64_t c = 0; c < x.dim_v; ++c) o_r[c] = x.safe ? acc_r[c] : kNaN;
      l_out[r] = x.safe ? 0.0f : kNaN;
      lse[r] = x.safe ? -kInf : kNaN;
      continue;
    }
    const float inv_l = 1.0f / l[r];
    const float factor = x.dropout ? inv_l * x.dropout_scale : inv_l;
    const float* acc_r = acc + r * x.dim_v;
    for (int64_t c = 0; c < x.dim_v; ++c) o_r[c] = acc_r[c] * factor;
    round_copy(x.precision, o_r, o_r, x.dim_v);
    l_out[r] = l[r];
    lse[r] = lse_of(m[r], l[r]);
  }
}

}  // namespace attnscope::cpu
