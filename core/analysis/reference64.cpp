// Streamed fp64 forward and per-group naive backward behind compute_reference64.
#include "core/analysis/reference64.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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

// Two doubles: partial sums u and u + 1 of a dot side by side (the baseline's SSE2 register).
typedef double v2d __attribute__((vector_size(16)));

v2d load2(const double* p) {
  v2d v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// a . b_x for the kRows rows b_x = b + x * ldb at once, each summed exactly as the others:
// four partial sums over t mod 4 (two v2d), the tail into the first, then
// (p0 + p1) + (p2 + p3). The rows' independent sums keep the FP units busy where one dot
// waits on its adds.
template <int kRows>
void dots(const double* a, const double* b, int64_t ldb, int64_t n, double* out) {
  v2d lo[kRows] = {}, hi[kRows] = {};  // partial sums 0, 1 and 2, 3
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    const v2d a_lo = load2(a + t), a_hi = load2(a + t + 2);
    for (int x = 0; x < kRows; ++x) {
      lo[x] += a_lo * load2(b + x * ldb + t);
      hi[x] += a_hi * load2(b + x * ldb + t + 2);
    }
  }
  for (int x = 0; x < kRows; ++x) {
    double p0 = lo[x][0];
    for (int64_t u = t; u < n; ++u) p0 += a[u] * b[x * ldb + u];
    out[x] = (p0 + lo[x][1]) + (hi[x][0] + hi[x][1]);
  }
}

// Forward of rows [i0, i1) of head (b, h), row by row, as reference_attention's forward:
//   s_ij = fill if masked, else softcap(scale q_i.k_j) + bias_ij;  m_i = max_j s_ij (NaN if
//   any s_ij is NaN);  l_i = sum_j exp(s_ij - m_i);  lse_i = m_i + log l_i;
//   o_i = sum_j exp(s_ij - m_i) / l_i z_ij v_j (z the dropout factor);  a row of -inf under
//   `safe`: o_i = sum_j 0 v_j (0 unless a value is NaN / Inf), lse_i = -inf.
// v_finite: every value of the head's kv head is finite (a zero weight then adds nothing).
void forward_rows(const CaseInputs& in, int64_t b, int64_t h, int64_t i0, int64_t i1, bool v_finite,
                  Reference64& r) {
  const AttnParams& p = in.params;
  const int64_t D = p.head_dim, Dv = p.head_dim_v, Sk = p.seqlen_k;
  const int64_t bh = b * p.heads + h, bkv = b * p.kv_heads + p.kv_head_of(h);
  const double* k = in.k.data() + bkv * Sk * D;
  const double* v = in.v.data() + bkv * Sk * Dv;
  const double fill = mask_fill_value(p.mask_fill, p.precision);
  std::vector<double> s(at(Sk)), o_acc(at(Dv));
  for (int64_t i = i0; i < i1; ++i) {
    const double* q_i = in.q.data() + (bh * p.seqlen_q + i) * D;
    double m = -kInf;
    bool nan_score = false;
    // q_i . k_j, four keys at a time where all four are visible.
    constexpr int kKeys = 4;
    for (int64_t j = 0; j < Sk; j += kKeys) {
      const int64_t keys = std::min<int64_t>(kKeys, Sk - j);
      bool visible[kKeys] = {}, all = keys == kKeys;
      for (int64_t x = 0; x < keys; ++x) {
        visible[x] = !is_masked(p, b, h, i, j + x);
        all = all && visible[x];
      }
      double qk[kKeys];
      if (all) dots<kKeys>(q_i, k + j * D, D, D, qk);
      for (int64_t x = 0; x < keys; ++x) {
        if (visible[x] && !all) dots<1>(q_i, k + (j + x) * D, D, D, qk + x);
      }
      for (int64_t x = 0; x < keys; ++x) {
        double score = fill;
        if (visible[x]) {
          score = p.scale * qk[x];
          if (p.softcap > 0) score = p.softcap * std::tanh(score / p.softcap);
          score += bias_at(p, b, h, i, j + x);
        }
        s[at(j + x)] = score;
        if (score > m) m = score;
        nan_score = nan_score || score != score;
      }
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
    // Summed in a buffer of its own, which the compiler may keep apart from v.
    std::fill(o_acc.begin(), o_acc.end(), 0.0);
    double* acc = o_acc.data();
    // Four keys per pass over acc where all four weigh something; each acc[c] still adds
    // w_j v_jc in key order.
    constexpr int kKeysPerPass = 4;
    for (int64_t j = 0; j < Sk;) {
      double w[kKeysPerPass];
      int64_t keys = 0;
      for (; keys < kKeysPerPass && j + keys < Sk; ++keys) {
        w[keys] = s[at(j + keys)] / l * dropout_factor(p, b, h, i, j + keys);
        if (w[keys] == 0 && v_finite) break;
      }
      if (keys == kKeysPerPass) {
        const double* v_j = v + j * Dv;
        for (int64_t c = 0; c < Dv; ++c) {
          acc[c] = (((acc[c] + w[0] * v_j[c]) + w[1] * v_j[Dv + c]) + w[2] * v_j[2 * Dv + c]) +
                   w[3] * v_j[3 * Dv + c];
        }
        j += kKeysPerPass;
        continue;
      }
      // Fewer than four weigh something: key j alone (skipped when it weighs nothing).
      if (keys > 0) {
        const double* v_j = v + j * Dv;
        for (int64_t c = 0; c < Dv; ++c) acc[c] += w[0] * v_j[c];
      }
      ++j;
    }
    std::copy(o_acc.begin(), o_acc.end(), o_i);
  }
}

// Query rows per work item of the forward: rows are independent, so one long head still
// spreads over every worker.
constexpr int64_t kForwardRows = 64;

void forward(const CaseInputs& in, int workers, const std::function<bool()>& stop, Reference64& r) {
  const AttnParams& p = in.params;
  const int64_t H = p.heads, Sk = p.seqlen_k, Dv = p.head_dim_v;
  // With finite values a zero weight adds exactly nothing; otherwise 0 * NaN must still run.
  std::vector<uint8_t> v_finite(at(p.batch * p.kv_heads), 1);
  cpu::parallel_for(p.batch * p.kv_heads, workers, [&](int64_t bkv, int) {
    const double* v = in.v.data() + bkv * Sk * Dv;
    for (int64_t e = 0; e < Sk * Dv && v_finite[at(bkv)]; ++e)
      v_finite[at(bkv)] = std::isfinite(v[e]);
  });
  const int64_t blocks = (p.seqlen_q + kForwardRows - 1) / kForwardRows;
  cpu::parallel_for(p.batch * H * blocks, workers, [&](int64_t item, int) {
    if (stop()) return;
    const int64_t bh = item / blocks, i0 = item % blocks * kForwardRows;
    const int64_t b = bh / H, h = bh % H;
    forward_rows(in, b, h, i0, std::min(i0 + kForwardRows, p.seqlen_q),
                 v_finite[at(b * p.kv_heads + p.kv_head_of(h))] != 0, r);
  });
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
    forward(in, workers, stop, r);
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
