// Streamed fp64 forward and per-group naive backward behind compute_reference64.
#include "core/analysis/reference64.h"

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/parallel_for.h"
#include "kernels/reference/reference_attention.h"

namespace attnscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

double dot(const double* a, const double* b, int64_t n) {
  double acc[4] = {0, 0, 0, 0};
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    for (int u = 0; u < 4; ++u) acc[u] += a[t + u] * b[t + u];
  }
  for (; t < n; ++t) acc[0] += a[t] * b[t];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// Forward of head (b, h), row by row, as reference_attention's forward:
//   s_ij = fill if masked, else softcap(scale q_i.k_j) + bias_ij;  m_i = max_j s_ij (NaN if
//   any s_ij is NaN);  l_i = sum_j exp(s_ij - m_i);  lse_i = m_i + log l_i;
//   o_i = sum_j exp(s_ij - m_i) / l_i z_ij v_j (z the dropout factor);  a row of -inf under
//   `safe`: o_i = sum_j 0 v_j (0 unless a value is NaN / Inf), lse_i = -inf.
void forward_head(const CaseInputs& in, int64_t b, int64_t h, Reference64& r) {
  const AttnParams& p = in.params;
  const int64_t D = p.head_dim, Dv = p.head_dim_v, Sk = p.seqlen_k;
  const int64_t bh = b * p.heads + h, bkv = b * p.kv_heads + p.kv_head_of(h);
  const double* k = in.k.data() + bkv * Sk * D;
  const double* v = in.v.data() + bkv * Sk * Dv;
  const double fill = mask_fill_value(p.mask_fill, p.precision);
  // With finite values a zero weight adds exactly nothing; otherwise 0 * NaN must still run.
  bool v_finite = true;
  for (int64_t e = 0; e < Sk * Dv && v_finite; ++e) v_finite = std::isfinite(v[e]);
  std::vector<double> s(at(Sk));
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    const double* q_i = in.q.data() + (bh * p.seqlen_q + i) * D;
    double m = -kInf;
    bool nan_score = false;
    for (int64_t j = 0; j < Sk; ++j) {
      double x = fill;
      if (!is_masked(p, b, h, i, j)) {
        x = p.scale * dot(q_i, k + j * D, D);
        if (p.softcap > 0) x = p.softcap * std::tanh(x / p.softcap);
        x += bias_at(p, b, h, i, j);
      }
      s[at(j)] = x;
      if (x > m) m = x;
      nan_score = nan_score || x != x;
    }
    if (nan_score) m = std::numeric_limits<double>::quiet_NaN();
    const int64_t row = bh * p.seqlen_q + i;
    double* o_i = r.o.data() + row * Dv;
    if (m == -kInf && p.mask_fill == MaskFill::safe) {
      r.lse[at(row)] = -kInf;
      // P = 0 on every key: o_i = sum 0 * v_j, 0 unless a value is non-finite.
      for (int64_t j = 0; j < Sk && !v_finite; ++j) {
        for (int64_t c = 0; c < Dv; ++c) o_i[c] += 0.0 * v[j * Dv + c];
      }
      continue;
    }
    double l = 0;
    for (int64_t j = 0; j < Sk; ++j) {
      s[at(j)] = s[at(j)] == -kInf && m != -kInf ? 0.0 : std::exp(s[at(j)] - m);
      l += s[at(j)];
    }
    r.lse[at(row)] = m + std::log(l);
    for (int64_t j = 0; j < Sk; ++j) {
      const double w = s[at(j)] / l * dropout_factor(p, b, h, i, j);
      if (w == 0 && v_finite) continue;
      const double* v_j = v + j * Dv;
      for (int64_t c = 0; c < Dv; ++c) o_i[c] += w * v_j[c];
    }
  }
}

// Forward and backward of the query heads of kv head g in batch b by the naive reference:
// a [1, group, Sq, *] slice whose mask / bias pointers start at (b, first head of the group).
void reference_group(const CaseInputs& in, int64_t b, int64_t g, Reference64& r) {
  const AttnParams& p = in.params;
  const int64_t G = p.group_size(), Sq = p.seqlen_q, Sk = p.seqlen_k;
  const int64_t D = p.head_dim, Dv = p.head_dim_v;
  const int64_t h0 = g * G, bh0 = b * p.heads + h0, bkv = b * p.kv_heads + g;
  AttnParams slice = p;
  slice.batch = 1;
  slice.heads = G;
  slice.kv_heads = 1;
  if (p.mask != nullptr) slice.mask = p.mask + b * p.mask_strides.b + h0 * p.mask_strides.h;
  if (p.bias != nullptr) slice.bias = p.bias + b * p.bias_strides.b + h0 * p.bias_strides.h;
  if (p.dropout_keep != nullptr) {
    slice.dropout_keep = p.dropout_keep + b * p.dropout_strides.b + h0 * p.dropout_strides.h;
  }
  const ReferenceTrace t = reference_attention(
      slice, in.q.data() + bh0 * Sq * D, in.k.data() + bkv * Sk * D, in.v.data() + bkv * Sk * Dv,
      in.has_dout ? in.dout.data() + bh0 * Sq * Dv : nullptr);
  std::copy(t.o.begin(), t.o.end(), r.o.begin() + bh0 * Sq * Dv);
  std::copy(t.lse.begin(), t.lse.end(), r.lse.begin() + bh0 * Sq);
  std::copy(t.dq.begin(), t.dq.end(), r.dq.begin() + bh0 * Sq * D);
  std::copy(t.dk.begin(), t.dk.end(), r.dk.begin() + bkv * Sk * D);
  std::copy(t.dv.begin(), t.dv.end(), r.dv.begin() + bkv * Sk * Dv);
}

}  // namespace

Reference64 compute_reference64(const CaseInputs& in, bool gradients, int threads,
                                const std::function<bool()>& cancelled) {
  const AttnParams& p = in.params;
  const int64_t B = p.batch, H = p.heads, Hk = p.kv_heads, Sq = p.seqlen_q, Sk = p.seqlen_k;
  Reference64 r;
  r.o.assign(at(B * H * Sq * p.head_dim_v), 0.0);
  r.lse.assign(at(B * H * Sq), 0.0);
  r.has_gradients = gradients;
  const int workers = cpu::resolve_threads(threads);
  auto stop = [&] { return cancelled && cancelled(); };
  if (!gradients) {
    cpu::parallel_for(B * H, workers, [&](int64_t bh, int) {
      if (!stop()) forward_head(in, bh / H, bh % H, r);
    });
    return r;
  }
  r.dq.assign(at(B * H * Sq * p.head_dim), 0.0);
  r.dk.assign(at(B * Hk * Sk * p.head_dim), 0.0);
  r.dv.assign(at(B * Hk * Sk * p.head_dim_v), 0.0);
  cpu::parallel_for(B * Hk, workers, [&](int64_t bg, int) {
    if (!stop()) reference_group(in, bg / Hk, bg % Hk, r);
  });
  return r;
}

}  // namespace attnscope
