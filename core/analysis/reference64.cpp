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

void store2(double* p, v2d v) {
  std::memcpy(p, &v, sizeof v);
}

// acc[c0, c0 + 2 kPairs) += w_x v[key_x][...] for x = 0 .. n-1 in that order, term by term
// (no reassociation), the columns held in registers over every key: kPairs independent
// chains of adds keep the FP units busy, and acc is read and written once.
template <int kPairs>
void add_weighted_columns(double* acc, const double* w, const int64_t* key, int64_t n,
                          const double* v, int64_t Dv) {
  v2d a[kPairs];
  for (int u = 0; u < kPairs; ++u) a[u] = load2(acc + 2 * u);
  for (int64_t x = 0; x < n; ++x) {
    const double* v_j = v + key[x] * Dv;
    const v2d wx = {w[x], w[x]};
    for (int u = 0; u < kPairs; ++u) a[u] += wx * load2(v_j + 2 * u);
  }
  for (int u = 0; u < kPairs; ++u) store2(acc + 2 * u, a[u]);
}

// acc[0, Dv) += w_x v[key_x] for x = 0 .. n-1 in that order, term by term.
void add_weighted_rows(double* acc, const double* w, const int64_t* key, int64_t n, const double* v,
                       int64_t Dv) {
  int64_t c = 0;
  for (; c + 16 <= Dv; c += 16) add_weighted_columns<8>(acc + c, w, key, n, v + c, Dv);
  for (; c + 2 <= Dv; c += 2) add_weighted_columns<1>(acc + c, w, key, n, v + c, Dv);
  for (; c < Dv; ++c) {
    double a = acc[c];
    for (int64_t x = 0; x < n; ++x) a += w[x] * v[key[x] * Dv + c];
    acc[c] = a;
  }
}

// Key tiles of the blocked forward: KT keys of k (and of v) stay in the core's cache while
// every row of the block uses them.
constexpr int64_t kKeyTile = 128;
// Scores the forward's workers hold at most, all together (fp64; at least one row each): 64 MiB,
// e.g. 64 rows of 32768 keys on each of 4 workers.
constexpr int64_t kScoreBytes = int64_t{64} << 20;
// Query rows per work item at most: rows are independent, so one long head still spreads
// over every worker.
constexpr int64_t kForwardRows = 64;

// Query rows per work item for Sk keys and `workers` workers: as many as each worker's share of
// kScoreBytes holds, 1 to kForwardRows.
int64_t forward_rows_per_item(int64_t Sk, int workers) {
  const int64_t fit = kScoreBytes / std::max(workers, 1) / (8 * std::max<int64_t>(Sk, 1));
  return std::clamp<int64_t>(fit, 1, kForwardRows);
}

// Keys [0, n) may be visible to a row in [i0, i1); causality hides every key from n on.
int64_t visible_key_end(const AttnParams& p, int64_t i1) {
  return p.causal ? std::clamp<int64_t>(i1 + causal_shift(p), 0, p.seqlen_k) : p.seqlen_k;
}

// Forward of rows [i0, i1) of head (b, h), as reference_attention's forward:
//   s_ij = fill if masked, else softcap(scale q_i.k_j) + bias_ij;  m_i = max_j s_ij (NaN if
//   any s_ij is NaN);  l_i = sum_j exp(s_ij - m_i);  lse_i = m_i + log l_i;
//   o_i = sum_j exp(s_ij - m_i) / l_i z_ij v_j (z the dropout factor);  a row of -inf under
//   `safe`: o_i = sum_j 0 v_j (0 unless a value is NaN / Inf), lse_i = -inf.
// Blocked: the scores s [rows, n] of keys [0, n) (n = visible_key_end) are computed key tile by
// key tile, then each row's exp and l in key order, then o key tile by key tile. Keys from n
// on all score `fill`. Every sum keeps the row-by-row order of the naive loop: l and each
// o_ic add key after key; a term that is exactly 0 (weight 0, finite values) is skipped.
// v_finite: every value of the head's kv head is finite (a zero weight then adds nothing).
// `s` and `acc` are the worker's scratch (resized here).
void forward_rows(const CaseInputs& in, int64_t b, int64_t h, int64_t i0, int64_t i1, bool v_finite,
                  std::vector<double>& s, std::vector<double>& acc, Reference64& r) {
  const AttnParams& p = in.params;
  const int64_t D = p.head_dim, Dv = p.head_dim_v, Sk = p.seqlen_k;
  const int64_t bh = b * p.heads + h, bkv = b * p.kv_heads + p.kv_head_of(h);
  const int64_t rows = i1 - i0, n = visible_key_end(p, i1);
  const double* k = in.k.data() + bkv * Sk * D;
  const double* v = in.v.data() + bkv * Sk * Dv;
  const double fill = mask_fill_value(p.mask_fill, p.precision);
  s.resize(at(rows * n));
  acc.assign(at(rows * Dv), 0.0);
  std::vector<double> m(at(rows), n < Sk ? fill : -kInf);  // keys from n on score `fill`
  std::vector<uint8_t> nan_score(at(rows), 0);
  // Scores, four keys at a time where all four are visible.
  constexpr int kKeys = 4;
  for (int64_t t0 = 0; t0 < n; t0 += kKeyTile) {
    const int64_t t1 = std::min(t0 + kKeyTile, n);
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = i0 + row;
      const double* q_i = in.q.data() + (bh * p.seqlen_q + i) * D;
      double* s_i = s.data() + row * n;
      for (int64_t j = t0; j < t1; j += kKeys) {
        const int64_t keys = std::min<int64_t>(kKeys, t1 - j);
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
          s_i[j + x] = score;
          if (score > m[at(row)]) m[at(row)] = score;
          nan_score[at(row)] |= score != score;
        }
      }
    }
  }
  // exp and l row by row; w_ij = exp(s_ij - m_i) / l_i z_ij in place of s_ij.
  std::vector<double> tail_weight(at(rows), 0.0);  // the weight of each key from n on
  std::vector<uint8_t> skip(at(rows), 0);          // a -inf row under `safe`
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t i = i0 + row, out = bh * p.seqlen_q + i;
    const double mi = nan_score[at(row)] ? std::numeric_limits<double>::quiet_NaN() : m[at(row)];
    if (mi == -kInf && p.mask_fill == MaskFill::safe) {
      r.lse[at(out)] = -kInf;
      skip[at(row)] = 1;
      // P = 0 on every key: o_i = sum 0 * v_j, 0 unless a value is non-finite.
      double* o_i = r.o.data() + out * Dv;
      for (int64_t j = 0; j < Sk && !v_finite; ++j) {
        for (int64_t c = 0; c < Dv; ++c) o_i[c] += 0.0 * v[j * Dv + c];
      }
      continue;
    }
    double* s_i = s.data() + row * n;
    double li = 0;
    for (int64_t j = 0; j < n; ++j) {
      s_i[j] = s_i[j] == -kInf && mi != -kInf ? 0.0 : std::exp(s_i[j] - mi);
      li += s_i[j];
    }
    const double tail = fill == -kInf && mi != -kInf ? 0.0 : std::exp(fill - mi);
    for (int64_t j = n; j < Sk && tail != 0; ++j) li += tail;
    r.lse[at(out)] = mi + std::log(li);
    for (int64_t j = 0; j < n; ++j) s_i[j] = s_i[j] / li * dropout_factor(p, b, h, i, j);
    tail_weight[at(row)] = tail / li;
  }
  // o = w v, key tile by key tile; each o_ic adds w_ij v_jc in key order, leaving out the keys
  // whose term is exactly 0 (weight 0, finite values).
  double tile_w[kKeyTile];
  int64_t tile_key[kKeyTile];
  for (int64_t t0 = 0; t0 < Sk; t0 += kKeyTile) {
    const int64_t t1 = std::min(t0 + kKeyTile, Sk);
    for (int64_t row = 0; row < rows; ++row) {
      if (skip[at(row)]) continue;
      const int64_t i = i0 + row;
      const double* s_i = s.data() + row * n;
      // Keys from n on weigh tail_weight (times dropout): nothing to add when it is 0.
      const int64_t end = tail_weight[at(row)] == 0 && v_finite ? std::min(t1, n) : t1;
      int64_t terms = 0;
      for (int64_t j = t0; j < end; ++j) {
        const double w = j < n ? s_i[j] : tail_weight[at(row)] * dropout_factor(p, b, h, i, j);
        if (w == 0 && v_finite) continue;
        tile_w[terms] = w;
        tile_key[terms++] = j;
      }
      add_weighted_rows(acc.data() + row * Dv, tile_w, tile_key, terms, v, Dv);
    }
  }
  for (int64_t row = 0; row < rows; ++row) {
    if (!skip[at(row)]) {
      std::copy_n(acc.data() + row * Dv, Dv, r.o.data() + (bh * p.seqlen_q + i0 + row) * Dv);
    }
  }
}

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
  const int64_t per_item = forward_rows_per_item(Sk, workers);
  const int64_t blocks = (p.seqlen_q + per_item - 1) / per_item;
  std::vector<std::vector<double>> scores(at(workers)), accs(at(workers));
  cpu::parallel_for(p.batch * H * blocks, workers, [&](int64_t item, int worker) {
    if (stop()) return;
    const int64_t bh = item / blocks, i0 = item % blocks * per_item;
    const int64_t b = bh / H, h = bh % H;
    forward_rows(in, b, h, i0, std::min(i0 + per_item, p.seqlen_q),
                 v_finite[at(b * p.kv_heads + p.kv_head_of(h))] != 0, scores[at(worker)],
                 accs[at(worker)], r);
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
