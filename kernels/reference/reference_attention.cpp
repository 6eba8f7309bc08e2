// Naive fp64 attention forward and backward, one (batch, head) at a time, keeping every
// intermediate of DESIGN §3 in full [Sq, Sk] resolution.
#include "kernels/reference/reference_attention.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace attnscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Sizes and base offsets of one (batch b, query head h) slice of every tensor.
struct HeadView {
  int64_t sq, sk, dim, dim_v;
  const double* q;   // [Sq, D]
  const double* k;   // [Sk, D]   (kv head h / group)
  const double* v;   // [Sk, Dv]
  const double* dO;  // [Sq, Dv]  nullptr = all ones
  double* s;         // [Sq, Sk]
  double* p;         // [Sq, Sk]
  double* dp;        // [Sq, Sk]
  double* ds;        // [Sq, Sk]
  double* m;         // [Sq]
  double* l;         // [Sq]
  double* lse;       // [Sq]
  double* d;         // [Sq]
  double* o;         // [Sq, Dv]
  double* dq;        // [Sq, D]
  double* dk;        // [Sk, D]   shared by the query heads of one kv group
  double* dv;        // [Sk, Dv]  shared by the query heads of one kv group
  // q, k, v and dO of this head are all finite, so a zero weight (p z = 0 or g = 0) adds exactly
  // nothing and its axpy can be skipped; with a NaN / Inf input 0 * x must still run.
  bool skip_zero_weights;
};

bool all_finite(const double* x, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    if (!std::isfinite(x[t])) return false;
  }
  return true;
}

// a . b with four partial sums (lets the compiler vectorise without reassociation flags).
double dot(const double* a, const double* b, int64_t n) {
  double acc[4] = {0, 0, 0, 0};
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    for (int u = 0; u < 4; ++u) acc[u] += a[t + u] * b[t + u];
  }
  for (; t < n; ++t) acc[0] += a[t] * b[t];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// y[0:n] += alpha * x[0:n]
void axpy(double alpha, const double* x, double* y, int64_t n) {
  for (int64_t t = 0; t < n; ++t) y[t] += alpha * x[t];
}

// Scores of one head, then the row softmax statistics and the output.
//   s_ij = fill                                 if masked (bool mask 0 or causal hides j)
//        = cap * tanh(scale * q_i.k_j / cap) + bias_ij   with softcap (cap > 0)
//        = scale * q_i.k_j + bias_ij                     otherwise
//   m_i = max_j s_ij,  l_i = sum_j exp(s_ij - m_i),  lse_i = m_i + log l_i
//   p_ij = exp(s_ij - m_i) / l_i  (= exp(s_ij - lse_i), but exact when |m_i| is huge, e.g. a
//   row filled with -1e9 where m_i + log l_i would round away log l_i),
//   o_i = sum_j p_ij z_ij v_j  (z = dropout_factor: 1 without dropout, else keep / (1 - p))
// grad_factor_ij = d s_ij / d (scale * q_i.k_j): 0 when masked (the fill is a constant),
// else the softcap derivative 1 - tanh^2(s0 / cap) (1 without softcap).
void forward_head(const AttnParams& prm, int64_t b, int64_t h, const HeadView& x,
                  std::vector<double>& grad_factor) {
  const double fill = mask_fill_value(prm.mask_fill, prm.precision);
  const double cap = prm.softcap;
  for (int64_t i = 0; i < x.sq; ++i) {
    double* s_row = x.s + i * x.sk;
    double* g_row = grad_factor.data() + i * x.sk;
    const double* q_i = x.q + i * x.dim;
    double m = -kInf;
    bool nan_score = false;
    for (int64_t j = 0; j < x.sk; ++j) {
      if (is_masked(prm, b, h, i, j)) {
        s_row[j] = fill;
        g_row[j] = 0;
      } else {
        double s = prm.scale * dot(q_i, x.k + j * x.dim, x.dim);
        g_row[j] = 1;
        if (cap > 0) {
          const double t = std::tanh(s / cap);
          s = cap * t;
          g_row[j] = 1 - t * t;
        }
        s_row[j] = s + bias_at(prm, b, h, i, j);
      }
      if (s_row[j] > m) m = s_row[j];
      nan_score = nan_score || std::isnan(s_row[j]);
    }
    if (nan_score) m = std::numeric_limits<double>::quiet_NaN();  // max propagates NaN
    // A row whose every score is -inf (fully masked, or -inf bias everywhere): under `safe` it
    // attends to nothing (l = 0, LSE = -inf, P = 0, O = P V = 0, but 0 * NaN = NaN when a
    // value is non-finite, as PyTorch's _safe_softmax followed by P @ V); otherwise
    // exp(-inf - -inf) = NaN flows through l, LSE, P and O exactly as in eager softmax.
    double* p_row = x.p + i * x.sk;
    double* o_i = x.o + i * x.dim_v;
    x.m[i] = m;
    if (m == -kInf && prm.mask_fill == MaskFill::safe) {
      x.l[i] = 0;
      x.lse[i] = -kInf;
      for (int64_t j = 0; j < x.sk; ++j) {
        p_row[j] = 0;
        if (!x.skip_zero_weights) axpy(0.0, x.v + j * x.dim_v, o_i, x.dim_v);
      }
      continue;
    }
    double l = 0;
    for (int64_t j = 0; j < x.sk; ++j) {
      p_row[j] = std::exp(s_row[j] - m);
      l += p_row[j];
    }
    x.l[i] = l;
    x.lse[i] = m + std::log(l);
    for (int64_t j = 0; j < x.sk; ++j) {
      p_row[j] /= l;
      const double w = p_row[j] * dropout_factor(prm, b, h, i, j);  // 0 * NaN stays NaN
      if (w != 0 || !x.skip_zero_weights) axpy(w, x.v + j * x.dim_v, o_i, x.dim_v);
    }
  }
}

// The P the backward differentiates through, per BackwardP: the forward's p_ij (saved), or
// exp(s_ij - lse_i) (from_lse), which is 1 on every key of a row of one huge finite score
// (lse_i = m_i there). A safe empty row (m = -inf) keeps p = 0 either way.
double backward_p_at(const AttnParams& prm, const HeadView& x, int64_t i, int64_t j) {
  if (prm.backward_p == BackwardP::saved) return x.p[i * x.sk + j];
  if (x.m[i] == -kInf && prm.mask_fill == MaskFill::safe) return 0;
  return std::exp(x.s[i * x.sk + j] - x.lse[i]);
}

// Backward of L = sum_i dO_i . o_i for one head, with o_i = sum_j p_ij z_ij v_j and
// p_ij = softmax_j(s_ij) (p from backward_p_at, z the dropout factor):
//   dv_j += sum_i p_ij z_ij dO_i            (accumulates over the heads of a kv group)
//   dp_ij = z_ij dO_i . v_j                 (the dP that enters dS; stored in ReferenceTrace)
//   d_i   = dO_i . o_i = sum_j p_ij dp_ij
//   ds_ij = p_ij (dp_ij - d_i)              (dL/ds_ij of the final scores)
//   g_ij  = ds_ij * grad_factor_ij           (dL/d(scale * q_i.k_j))
//   dq_i  = scale * sum_j g_ij k_j,   dk_j += scale * sum_i g_ij q_i
// Masked entries pass ds_ij * 0 to q and k: zero, except NaN stays NaN like an additive -inf
// mask, so a fully masked row under a non-safe fill poisons dq, dk and dv as in PyTorch. A
// dropped entry (z = 0) likewise adds exactly 0 unless it multiplies a NaN / Inf.
void backward_head(const AttnParams& prm, int64_t b, int64_t h, const HeadView& x,
                   const std::vector<double>& grad_factor) {
  std::vector<double> ones;
  if (x.dO == nullptr) ones.assign(static_cast<size_t>(x.dim_v), 1.0);
  for (int64_t i = 0; i < x.sq; ++i) {
    const double* dO_i = x.dO != nullptr ? x.dO + i * x.dim_v : ones.data();
    const double* q_i = x.q + i * x.dim;
    const double* g_row = grad_factor.data() + i * x.sk;
    double* dp_row = x.dp + i * x.sk;
    double* ds_row = x.ds + i * x.sk;
    double* dq_i = x.dq + i * x.dim;

    x.d[i] = dot(dO_i, x.o + i * x.dim_v, x.dim_v);
    for (int64_t j = 0; j < x.sk; ++j) {
      const double z = dropout_factor(prm, b, h, i, j);
      const double p = backward_p_at(prm, x, i, j);
      const double w = p * z;
      if (w != 0 || !x.skip_zero_weights) axpy(w, dO_i, x.dv + j * x.dim_v, x.dim_v);
      dp_row[j] = z * dot(dO_i, x.v + j * x.dim_v, x.dim_v);
      ds_row[j] = p * (dp_row[j] - x.d[i]);
      const double g = prm.scale * (ds_row[j] * g_row[j]);
      if (g != 0 || !x.skip_zero_weights) {
        axpy(g, x.k + j * x.dim, dq_i, x.dim);
        axpy(g, q_i, x.dk + j * x.dim, x.dim);
      }
    }
  }
}

}  // namespace

ReferenceTrace reference_attention(const AttnParams& params, const double* q, const double* k,
                                   const double* v, const double* dout) {
  const int64_t B = params.batch, H = params.heads, Hk = params.kv_heads;
  const int64_t Sq = params.seqlen_q, Sk = params.seqlen_k;
  const int64_t D = params.head_dim, Dv = params.head_dim_v;
  const auto n = [](int64_t count) { return static_cast<size_t>(count); };

  ReferenceTrace t;
  t.s.assign(n(B * H * Sq * Sk), 0.0);
  t.p.assign(n(B * H * Sq * Sk), 0.0);
  t.dp.assign(n(B * H * Sq * Sk), 0.0);
  t.ds.assign(n(B * H * Sq * Sk), 0.0);
  t.m.assign(n(B * H * Sq), 0.0);
  t.l.assign(n(B * H * Sq), 0.0);
  t.lse.assign(n(B * H * Sq), 0.0);
  t.d.assign(n(B * H * Sq), 0.0);
  t.o.assign(n(B * H * Sq * Dv), 0.0);
  t.dq.assign(n(B * H * Sq * D), 0.0);
  t.dk.assign(n(B * Hk * Sk * D), 0.0);
  t.dv.assign(n(B * Hk * Sk * Dv), 0.0);

  std::vector<double> grad_factor(n(Sq * Sk));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      const int64_t bkv = b * Hk + params.kv_head_of(h);
      HeadView x{};
      x.sq = Sq;
      x.sk = Sk;
      x.dim = D;
      x.dim_v = Dv;
      x.q = q + bh * Sq * D;
      x.k = k + bkv * Sk * D;
      x.v = v + bkv * Sk * Dv;
      x.dO = dout != nullptr ? dout + bh * Sq * Dv : nullptr;
      x.s = t.s.data() + bh * Sq * Sk;
      x.p = t.p.data() + bh * Sq * Sk;
      x.dp = t.dp.data() + bh * Sq * Sk;
      x.ds = t.ds.data() + bh * Sq * Sk;
      x.m = t.m.data() + bh * Sq;
      x.l = t.l.data() + bh * Sq;
      x.lse = t.lse.data() + bh * Sq;
      x.d = t.d.data() + bh * Sq;
      x.o = t.o.data() + bh * Sq * Dv;
      x.dq = t.dq.data() + bh * Sq * D;
      x.dk = t.dk.data() + bkv * Sk * D;
      x.dv = t.dv.data() + bkv * Sk * Dv;
      x.skip_zero_weights = all_finite(x.q, Sq * D) && all_finite(x.k, Sk * D) &&
                            all_finite(x.v, Sk * Dv) &&
                            (x.dO == nullptr || all_finite(x.dO, Sq * Dv));
      forward_head(params, b, h, x, grad_factor);
      backward_head(params, b, h, x, grad_factor);
    }
  }
  return t;
}

}  // namespace attnscope
