// Streamed fp64 forward and backward behind compute_reference64, bit-identical to the naive
// reference (kernels/reference) without its [Sq, Sk] matrices: the vector parts round as its
// scalar loops (kernels/cpu/exact64.h), and every sum adds its terms in the naive loop's order.
#include "core/analysis/reference64.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/cpu/exact64.h"
#include "kernels/cpu/parallel_for.h"

namespace attnscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

bool all_finite(const double* x, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    if (!std::isfinite(x[t])) return false;
  }
  return true;
}

// Keys per tile: a tile of k (and of v), transposed, stays in the core's cache while every row
// of a block uses it.
constexpr int64_t kKeyTile = 64;
// Scores the forward's workers hold at most, all together (fp64; at least one row each): 64 MiB,
// e.g. 64 rows of 32768 keys on each of 4 workers.
constexpr int64_t kScoreBytes = int64_t{64} << 20;
// Query rows per work item (forward) and per block (backward) at most.
constexpr int64_t kRowBlock = 64;

// Query rows per forward work item for Sk keys and `workers` workers: as many as each worker's
// share of kScoreBytes holds, 1 to kRowBlock.
int64_t forward_rows_per_item(int64_t Sk, int workers) {
  const int64_t fit = kScoreBytes / std::max(workers, 1) / (8 * std::max<int64_t>(Sk, 1));
  return std::clamp<int64_t>(fit, 1, kRowBlock);
}

// Keys [0, n) may be visible to a row in [i0, i1); causality hides every key from n on.
int64_t visible_key_end(const AttnParams& p, int64_t i1) {
  return p.causal ? std::clamp<int64_t>(i1 + causal_shift(p), 0, p.seqlen_k) : p.seqlen_k;
}

// Leading dimension of a block copied for the exact products: `cols` plus 8 doubles, so that
// its rows do not all fall into the same few sets of the L1 cache (a 512-byte or 1 KiB stride).
int64_t padded(int64_t cols) {
  return cols + 8;
}

// `rows` rows of x [*, ld_x] (ld_x = 0: one row repeated) copied into y [rows, padded(cols)].
void copy_rows(const double* x, int64_t ld_x, int64_t rows, int64_t cols, std::vector<double>& y) {
  const int64_t ld = padded(cols);
  y.resize(at(rows * ld));
  for (int64_t r = 0; r < rows; ++r) std::copy_n(x + r * ld_x, cols, y.data() + r * ld);
}

// x [rows, cols] transposed tile by tile of kKeyTile rows: tile t is [cols, padded(kKeyTile)]
// at xt + t * tile_size(cols), so that a tile's strip of columns lies in a few pages.
int64_t tile_size(int64_t cols) {
  return cols * padded(kKeyTile);
}
void transpose_tiles(const double* x, int64_t rows, int64_t cols, std::vector<double>& xt) {
  const int64_t ld = padded(kKeyTile), tiles = (rows + kKeyTile - 1) / kKeyTile;
  xt.assign(at(tiles * tile_size(cols)), 0.0);
  for (int64_t j = 0; j < rows; ++j) {
    double* tile = xt.data() + j / kKeyTile * tile_size(cols) + j % kKeyTile;
    for (int64_t c = 0; c < cols; ++c) tile[c * ld] = x[j * cols + c];
  }
}

// One kv head's k and v as the exact products read them, kept by a worker while its work items
// use that kv head: kt and vt by transpose_tiles, kb [Sk, padded(D)], vb [Sk, padded(Dv)].
struct KvBlocks {
  int64_t bkv = -1;
  std::vector<double> kt, vt, kb, vb;

  void prepare(const CaseInputs& in, int64_t kv) {
    if (bkv == kv) return;
    const AttnParams& p = in.params;
    const int64_t Sk = p.seqlen_k, D = p.head_dim, Dv = p.head_dim_v;
    const double* k = in.k.data() + kv * Sk * D;
    const double* v = in.v.data() + kv * Sk * Dv;
    transpose_tiles(k, Sk, D, kt);
    transpose_tiles(v, Sk, Dv, vt);
    copy_rows(k, D, Sk, D, kb);
    copy_rows(v, Dv, Sk, Dv, vb);
    bkv = kv;
  }
  // The transposed tile of keys from t0 (a multiple of kKeyTile), leading dimension
  // padded(kKeyTile).
  const double* k_tile(int64_t t0, int64_t D) const {
    return kt.data() + t0 / kKeyTile * tile_size(D);
  }
  const double* v_tile(int64_t t0, int64_t Dv) const {
    return vt.data() + t0 / kKeyTile * tile_size(Dv);
  }
};

// Softmax statistics of every query row [B, H, Sq] that the backward needs besides lse.
struct RowStats {
  std::vector<double> m, l;  // row max (NaN if a score is NaN), sum of exp(s - m)
};

// A worker's scratch.
struct Scratch {
  KvBlocks kv;
  std::vector<double> s, acc, qb, db, weights, dp, g, gt, wt;
};

// Forward of rows [i0, i1) of head (b, h), as reference_attention's forward:
//   s_ij = fill if masked, else softcap(scale q_i.k_j) + bias_ij;  m_i = max_j s_ij (NaN if
//   any s_ij is NaN);  l_i = sum_j exp(s_ij - m_i);  lse_i = m_i + log l_i;
//   o_i = sum_j exp(s_ij - m_i) / l_i z_ij v_j (z the dropout factor);  a row of -inf under
//   `safe`: o_i = sum_j 0 v_j (0 unless a value is NaN / Inf), lse_i = -inf, l_i = 0.
// Blocked: the scores s [rows, n] of keys [0, n) (n = visible_key_end) are computed key tile by
// key tile, then each row's exp and l in key order, then o key tile by key tile. Keys from n
// on all score `fill`. Every sum keeps the row-by-row order of the naive loop: l and each
// o_ic add key after key; a term that is exactly 0 (weight 0, finite values) is skipped.
// v_finite: every value of the head's kv head is finite (a zero weight then adds nothing).
// `stats`, when given, receives m and l.
void forward_rows(const CaseInputs& in, int64_t b, int64_t h, int64_t i0, int64_t i1, bool v_finite,
                  Scratch& w, Reference64& r, RowStats* stats) {
  const AttnParams& p = in.params;
  const int64_t D = p.head_dim, Dv = p.head_dim_v, Sk = p.seqlen_k;
  const int64_t bh = b * p.heads + h, bkv = b * p.kv_heads + p.kv_head_of(h);
  const int64_t rows = i1 - i0, n = visible_key_end(p, i1);
  const double* v = in.v.data() + bkv * Sk * Dv;
  const double fill = mask_fill_value(p.mask_fill, p.precision);
  w.kv.prepare(in, bkv);
  w.s.resize(at(rows * n));
  w.acc.assign(at(rows * Dv), 0.0);
  std::vector<double> m(at(rows), n < Sk ? fill : -kInf);  // keys from n on score `fill`
  std::vector<uint8_t> nan_score(at(rows), 0);
  for (int64_t t0 = 0; t0 < n; t0 += kKeyTile) {
    const int64_t t1 = std::min(t0 + kKeyTile, n);
    cpu::exact_dot_block(rows, t1 - t0, D, in.q.data() + (bh * p.seqlen_q + i0) * D, D,
                         w.kv.k_tile(t0, D), padded(kKeyTile), w.s.data() + t0, n);
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = i0 + row;
      double* s_i = w.s.data() + row * n;
      for (int64_t j = t0; j < t1; ++j) {
        double score = fill;
        if (!is_masked(p, b, h, i, j)) {
          score = p.scale * s_i[j];
          if (p.softcap > 0) score = p.softcap * std::tanh(score / p.softcap);
          score += bias_at(p, b, h, i, j);
        }
        s_i[j] = score;
        if (score > m[at(row)]) m[at(row)] = score;
        nan_score[at(row)] |= score != score;
      }
    }
  }
  // exp and l row by row; w_ij = exp(s_ij - m_i) / l_i z_ij in place of s_ij.
  std::vector<double> tail_weight(at(rows), 0.0);  // the weight of each key from n on
  std::vector<uint8_t> skip(at(rows), 0);          // a -inf row under `safe`
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t i = i0 + row, out = bh * p.seqlen_q + i;
    const double mi = nan_score[at(row)] ? std::numeric_limits<double>::quiet_NaN() : m[at(row)];
    if (stats != nullptr) stats->m[at(out)] = mi;
    if (mi == -kInf && p.mask_fill == MaskFill::safe) {
      r.lse[at(out)] = -kInf;
      if (stats != nullptr) stats->l[at(out)] = 0;
      skip[at(row)] = 1;
      // P = 0 on every key: o_i = sum 0 * v_j, 0 unless a value is non-finite.
      double* o_i = r.o.data() + out * Dv;
      for (int64_t j = 0; j < Sk && !v_finite; ++j) {
        for (int64_t c = 0; c < Dv; ++c) o_i[c] += 0.0 * v[j * Dv + c];
      }
      continue;
    }
    double* s_i = w.s.data() + row * n;
    double li = 0;
    for (int64_t j = 0; j < n; ++j) {
      s_i[j] = s_i[j] == -kInf && mi != -kInf ? 0.0 : std::exp(s_i[j] - mi);
      li += s_i[j];
    }
    const double tail = fill == -kInf && mi != -kInf ? 0.0 : std::exp(fill - mi);
    for (int64_t j = n; j < Sk && tail != 0; ++j) li += tail;
    r.lse[at(out)] = mi + std::log(li);
    if (stats != nullptr) stats->l[at(out)] = li;
    for (int64_t j = 0; j < n; ++j) s_i[j] = s_i[j] / li * dropout_factor(p, b, h, i, j);
    tail_weight[at(row)] = tail / li;
  }
  // o = w v, key tile by key tile; each o_ic adds w_ij v_jc in key order. The naive loop skips
  // a term of weight exactly 0 when the values are finite: its product is a zero, which leaves
  // the sum (started at +0) as it was. Keys from n on weigh tail_weight (times dropout).
  bool tails = !v_finite;
  for (int64_t row = 0; row < rows; ++row)
    tails = tails || (!skip[at(row)] && tail_weight[at(row)] != 0);
  const int64_t end = tails ? Sk : n;
  w.weights.resize(at(rows * kKeyTile));
  for (int64_t t0 = 0; t0 < end; t0 += kKeyTile) {
    const int64_t t1 = std::min(t0 + kKeyTile, end), nt = t1 - t0;
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = i0 + row;
      const double* s_i = w.s.data() + row * n;
      double* w_i = w.weights.data() + row * nt;
      for (int64_t j = t0; j < t1; ++j) {
        w_i[j - t0] = skip[at(row)] ? 0.0
                      : j < n       ? s_i[j]
                                    : tail_weight[at(row)] * dropout_factor(p, b, h, i, j);
      }
    }
    cpu::exact_gemm_update(rows, Dv, nt, w.weights.data(), nt, w.kv.vb.data() + t0 * padded(Dv),
                           padded(Dv), w.acc.data(), Dv);
  }
  for (int64_t row = 0; row < rows; ++row) {
    if (!skip[at(row)]) {
      std::copy_n(w.acc.data() + row * Dv, Dv, r.o.data() + (bh * p.seqlen_q + i0 + row) * Dv);
    }
  }
}

void forward(const CaseInputs& in, int workers, const std::function<bool()>& stop, Reference64& r,
             RowStats* stats) {
  const AttnParams& p = in.params;
  const int64_t H = p.heads, Sk = p.seqlen_k, Dv = p.head_dim_v;
  // With finite values a zero weight adds exactly nothing; otherwise 0 * NaN must still run.
  std::vector<uint8_t> v_finite(at(p.batch * p.kv_heads), 1);
  cpu::parallel_for(p.batch * p.kv_heads, workers, [&](int64_t bkv, int) {
    v_finite[at(bkv)] = all_finite(in.v.data() + bkv * Sk * Dv, Sk * Dv);
  });
  const int64_t per_item = forward_rows_per_item(Sk, workers);
  const int64_t blocks = (p.seqlen_q + per_item - 1) / per_item;
  std::vector<Scratch> scratch(at(workers));
  cpu::parallel_for(p.batch * H * blocks, workers, [&](int64_t item, int worker) {
    if (stop()) return;
    const int64_t bh = item / blocks, i0 = item % blocks * per_item;
    const int64_t b = bh / H, h = bh % H;
    forward_rows(in, b, h, i0, std::min(i0 + per_item, p.seqlen_q),
                 v_finite[at(b * p.kv_heads + p.kv_head_of(h))] != 0, scratch[at(worker)], r,
                 stats);
  });
}

// Backward of L = sum_i dO_i . o_i for the query heads of kv head g in batch b, as
// reference_attention's backward (per head h, row i, key j: dv_j += p z dO_i, dp = z dO_i.v_j,
// ds = p (dp - d_i), g = scale (ds * softcap'), dq_i += g k_j, dk_j += g q_i, a term skipped
// when its weight is exactly 0 and the head's q, k, v, dO are finite), head by head, block by
// block of query rows, key tile by key tile: each row's dq takes the keys in order and each
// key's dk / dv the rows in (h, i) order, the naive loop's order of every sum; a skipped term's
// product is a zero, which leaves the sum (started at +0) as it was. Nothing of size [Sq, Sk]
// is held. p is the forward's saved exp(s - m) / l or exp(s - lse) (BackwardP::from_lse); 0 on
// a -inf row under `safe`.
void backward_group(const CaseInputs& in, int64_t b, int64_t g, const RowStats& st,
                    const std::function<bool()>& stop, Scratch& w, Reference64& r) {
  const AttnParams& p = in.params;
  const int64_t G = p.group_size(), Sq = p.seqlen_q, Sk = p.seqlen_k;
  const int64_t D = p.head_dim, Dv = p.head_dim_v;
  const int64_t bkv = b * p.kv_heads + g;
  double* dk = r.dk.data() + bkv * Sk * D;
  double* dv = r.dv.data() + bkv * Sk * Dv;
  const double fill = mask_fill_value(p.mask_fill, p.precision);
  const bool kv_finite = all_finite(in.k.data() + bkv * Sk * D, Sk * D) &&
                         all_finite(in.v.data() + bkv * Sk * Dv, Sk * Dv);
  w.kv.prepare(in, bkv);
  const KvBlocks& kv = w.kv;
  const std::vector<double> ones(at(Dv), 1.0);
  const int64_t do_ld = in.has_dout ? Dv : 0;  // rows of dO, or one row of ones
  const int64_t T = kKeyTile, R = kRowBlock;
  w.s.resize(at(R * T));              // q_i . k_j of a block and tile
  w.dp.resize(at(R * T));             // dO_i . v_j
  w.g.resize(at(R * T));              // g [row, key]
  w.gt.resize(at(T * R));             // g [key, row]
  w.wt.resize(at(T * R));             // p z [key, row]
  std::vector<double> d(at(R));       // d_i = dO_i . o_i of a block
  std::vector<int64_t> reach(at(R));  // keys [0, reach) of a row may add something
  std::vector<int64_t> end(at(R));    // keys [t0, end) of a row in the tile may add something
  for (int64_t x = 0; x < G; ++x) {
    const int64_t h = g * G + x, bh = b * p.heads + h;
    const double* q = in.q.data() + bh * Sq * D;
    const double* dO = in.has_dout ? in.dout.data() + bh * Sq * Dv : ones.data();
    const bool skip =
        kv_finite && all_finite(q, Sq * D) && (!in.has_dout || all_finite(dO, Sq * Dv));
    const auto p_of = [&](int64_t i, double s) {
      const int64_t ri = bh * Sq + i;
      if (st.m[at(ri)] == -kInf && p.mask_fill == MaskFill::safe) return 0.0;
      return p.backward_p == BackwardP::saved ? std::exp(s - st.m[at(ri)]) / st.l[at(ri)]
                                              : std::exp(s - r.lse[at(ri)]);
    };
    for (int64_t i0 = 0; i0 < Sq; i0 += R) {
      if (stop()) return;
      const int64_t rows = std::min(R, Sq - i0);
      copy_rows(q + i0 * D, D, rows, D, w.qb);
      copy_rows(dO + i0 * do_ld, do_ld, rows, Dv, w.db);
      for (int64_t row = 0; row < rows; ++row) {
        cpu::exact_dot_block(1, 1, Dv, w.db.data() + row * padded(Dv), 0,
                             r.o.data() + (bh * Sq + i0 + row) * Dv, 1, &d[at(row)], 1);
      }
      // Keys from visible_key_end on are hidden by causality; where their p is 0 and the
      // inputs are finite they add nothing: tiles from `last` on are left out, and rows
      // [lo, hi) of a tile hold every row that adds.
      int64_t last = 0;
      for (int64_t row = 0; row < rows; ++row) {
        const int64_t i = i0 + row;
        reach[at(row)] = skip && p_of(i, fill) == 0 ? visible_key_end(p, i + 1) : Sk;
        last = std::max(last, reach[at(row)]);
      }
      for (int64_t t0 = 0; t0 < last; t0 += T) {
        const int64_t t1 = std::min(t0 + T, Sk), nt = t1 - t0;
        int64_t lo = rows, hi = 0;
        for (int64_t row = 0; row < rows; ++row) {
          end[at(row)] = std::clamp(reach[at(row)], t0, t1);
          if (end[at(row)] > t0) {
            lo = std::min(lo, row);
            hi = row + 1;
          }
        }
        if (lo >= hi) continue;
        const int64_t n_rows = hi - lo;
        const double* qb = w.qb.data() + lo * padded(D);
        const double* db = w.db.data() + lo * padded(Dv);
        cpu::exact_dot_block(n_rows, nt, D, qb, padded(D), kv.k_tile(t0, D), padded(T),
                             w.s.data() + lo * T, T);
        cpu::exact_dot_block(n_rows, nt, Dv, db, padded(Dv), kv.v_tile(t0, Dv), padded(T),
                             w.dp.data() + lo * T, T);
        for (int64_t row = lo; row < hi; ++row) {
          const int64_t i = i0 + row;
          for (int64_t jj = 0; jj < nt; ++jj) {
            const int64_t j = t0 + jj;
            double wij = 0, gij = 0;
            if (j < end[at(row)]) {
              double s = fill, factor = 0;  // the score and d s / d(scale q.k)
              if (!is_masked(p, b, h, i, j)) {
                s = p.scale * w.s[at(row * T + jj)];
                factor = 1;
                if (p.softcap > 0) {
                  const double t = std::tanh(s / p.softcap);
                  s = p.softcap * t;
                  factor = 1 - t * t;
                }
                s += bias_at(p, b, h, i, j);
              }
              const double z = dropout_factor(p, b, h, i, j);
              const double pij = p_of(i, s);
              wij = pij * z;
              gij = p.scale * (pij * (z * w.dp[at(row * T + jj)] - d[at(row)]) * factor);
            }
            w.g[at(row * T + jj)] = gij;
            w.gt[at(jj * R + row)] = gij;
            w.wt[at(jj * R + row)] = wij;
          }
        }
        cpu::exact_gemm_update(n_rows, D, nt, w.g.data() + lo * T, T, kv.kb.data() + t0 * padded(D),
                               padded(D), r.dq.data() + (bh * Sq + i0 + lo) * D, D);
        cpu::exact_gemm_update(nt, D, n_rows, w.gt.data() + lo, R, qb, padded(D), dk + t0 * D, D);
        cpu::exact_gemm_update(nt, Dv, n_rows, w.wt.data() + lo, R, db, padded(Dv), dv + t0 * Dv,
                               Dv);
      }
    }
  }
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
    forward(in, workers, stop, r, nullptr);
    return r;
  }
  RowStats stats;
  stats.m.assign(at(B * H * Sq), 0.0);
  stats.l.assign(at(B * H * Sq), 0.0);
  forward(in, workers, stop, r, &stats);
  r.dq.assign(at(B * H * Sq * p.head_dim), 0.0);
  r.dk.assign(at(B * Hk * Sk * p.head_dim), 0.0);
  r.dv.assign(at(B * Hk * Sk * p.head_dim_v), 0.0);
  std::vector<Scratch> scratch(at(workers));
  cpu::parallel_for(B * Hk, workers, [&](int64_t bg, int worker) {
    if (!stop()) backward_group(in, bg / Hk, bg % Hk, stats, stop, scratch[at(worker)], r);
  });
  return r;
}

}  // namespace attnscope
