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

bool all_finite(const std::vector<double>& x) {
  return std::all_of(x.begin(), x.end(), [](double t) { return std::isfinite(t); });
}

// `n` values from element `first` of a tensor into x.
void read(const ValueReader& tensor, int64_t first, int64_t n, std::vector<double>& x) {
  x.resize(at(n));
  tensor(first, n, x.data());
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
  bool k_finite = true, v_finite = true;  // every value of the kv head's k / v is finite

  void prepare(const ReferenceInputs& in, int64_t kv, std::vector<double>& raw) {
    if (bkv == kv) return;
    const AttnParams& p = in.params;
    const int64_t Sk = p.seqlen_k, D = p.head_dim, Dv = p.head_dim_v;
    read(in.k, kv * Sk * D, Sk * D, raw);
    k_finite = all_finite(raw);
    transpose_tiles(raw.data(), Sk, D, kt);
    copy_rows(raw.data(), D, Sk, D, kb);
    read(in.v, kv * Sk * Dv, Sk * Dv, raw);
    v_finite = all_finite(raw);
    transpose_tiles(raw.data(), Sk, Dv, vt);
    copy_rows(raw.data(), Dv, Sk, Dv, vb);
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
  std::vector<double> raw;  // values as read, before they are laid out for the products
  std::vector<double> s, acc, qb, db, weights;
  // The backward's block of rows and key tile (GroupBackward): q_i . k_j, dO_i . v_j, g
  // [row, key] and [key, row], p z [key, row]; per row d_i, the keys it may add something
  // with (reach) and those of the tile (end); rows [lo, hi) of the tile add something.
  std::vector<double> dp = std::vector<double>(at(kRowBlock * kKeyTile));
  std::vector<double> g = std::vector<double>(at(kRowBlock * kKeyTile));
  std::vector<double> gt = std::vector<double>(at(kKeyTile * kRowBlock));
  std::vector<double> wt = std::vector<double>(at(kKeyTile * kRowBlock));
  std::vector<double> d = std::vector<double>(at(kRowBlock));
  std::vector<int64_t> reach = std::vector<int64_t>(at(kRowBlock));
  std::vector<int64_t> end = std::vector<int64_t>(at(kRowBlock));
  int64_t rows = 0, lo = 0, hi = 0;
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
// With finite values of the kv head a zero weight adds exactly nothing; otherwise 0 * NaN must
// still run. r and `stats` (when given: m and l) hold query heads from bh0 on.
void forward_rows(const ReferenceInputs& in, int64_t b, int64_t h, int64_t i0, int64_t i1,
                  int64_t bh0, Scratch& w, Reference64& r, RowStats* stats) {
  const AttnParams& p = in.params;
  const int64_t D = p.head_dim, Dv = p.head_dim_v, Sk = p.seqlen_k;
  const int64_t bh = b * p.heads + h, bkv = b * p.kv_heads + p.kv_head_of(h);
  const int64_t local = bh - bh0;  // r's head
  const int64_t rows = i1 - i0, n = visible_key_end(p, i1);
  const double fill = mask_fill_value(p.mask_fill, p.precision);
  w.kv.prepare(in, bkv, w.raw);
  const bool v_finite = w.kv.v_finite;
  read(in.q, (bh * p.seqlen_q + i0) * D, rows * D, w.qb);
  w.s.resize(at(rows * n));
  w.acc.assign(at(rows * Dv), 0.0);
  std::vector<double> m(at(rows), n < Sk ? fill : -kInf);  // keys from n on score `fill`
  std::vector<uint8_t> nan_score(at(rows), 0);
  for (int64_t t0 = 0; t0 < n; t0 += kKeyTile) {
    const int64_t t1 = std::min(t0 + kKeyTile, n);
    cpu::exact_dot_block(rows, t1 - t0, D, w.qb.data(), D, w.kv.k_tile(t0, D), padded(kKeyTile),
                         w.s.data() + t0, n);
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
    const int64_t i = i0 + row, out = local * p.seqlen_q + i;
    const double mi = nan_score[at(row)] ? std::numeric_limits<double>::quiet_NaN() : m[at(row)];
    if (stats != nullptr) stats->m[at(out)] = mi;
    if (mi == -kInf && p.mask_fill == MaskFill::safe) {
      r.lse[at(out)] = -kInf;
      if (stats != nullptr) stats->l[at(out)] = 0;
      skip[at(row)] = 1;
      // P = 0 on every key: o_i = sum 0 * v_j, 0 unless a value is non-finite.
      double* o_i = r.o.data() + out * Dv;
      for (int64_t j = 0; j < Sk && !v_finite; ++j) {
        for (int64_t c = 0; c < Dv; ++c) o_i[c] += 0.0 * w.kv.vb[at(j * padded(Dv) + c)];
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
      std::copy_n(w.acc.data() + row * Dv, Dv, r.o.data() + (local * p.seqlen_q + i0 + row) * Dv);
    }
  }
}

// Forward of the query heads [bh0, bh1) into r (and stats), which hold them from bh0 on.
void forward(const ReferenceInputs& in, int64_t bh0, int64_t bh1, const std::function<bool()>& stop,
             std::vector<Scratch>& scratch, Reference64& r, RowStats* stats) {
  const AttnParams& p = in.params;
  const int64_t H = p.heads, Sk = p.seqlen_k;
  const int workers = static_cast<int>(scratch.size());
  const int64_t per_item = forward_rows_per_item(Sk, workers);
  const int64_t blocks = (p.seqlen_q + per_item - 1) / per_item;
  cpu::parallel_for((bh1 - bh0) * blocks, workers, [&](int64_t item, int worker) {
    if (stop()) return;
    const int64_t bh = bh0 + item / blocks, i0 = item % blocks * per_item;
    const int64_t b = bh / H, h = bh % H;
    forward_rows(in, b, h, i0, std::min(i0 + per_item, p.seqlen_q), bh0, scratch[at(worker)], r,
                 stats);
  });
}

// Backward of L = sum_i dO_i . o_i for the query heads of one (batch, kv group), as
// reference_attention's backward (per head h, row i, key j: dv_j += p z dO_i, dp = z dO_i.v_j,
// ds = p (dp - d_i), g = scale (ds * softcap'), dq_i += g k_j, dk_j += g q_i, a term skipped
// when its weight is exactly 0 and the head's q, k, v, dO are finite), block of query rows by
// block, key tile by key tile: each row's dq takes the keys in order and each key's dk / dv the
// rows in (h, i) order, the naive loop's order of every sum; a skipped term's product is a
// zero, which leaves the sum (started at +0) as it was. Nothing of size [Sq, Sk] is held. p is
// the forward's saved exp(s - m) / l or exp(s - lse) (BackwardP::from_lse); 0 on a -inf row
// under `safe`. r and st hold the groups from bkv0 on (their query heads from bkv0 * G on).
// One worker runs it whole (all()), or several share it: dk, dv by key tiles (keys()), then dq
// by row blocks (rows()), each recomputing the terms it needs (7 products a term, not 5).
class GroupBackward {
 public:
  // kv: the group's k and v, prepared. Reads the group's q and dO once (skip_).
  GroupBackward(const ReferenceInputs& in, int64_t bkv, int64_t bkv0, const RowStats& st,
                const KvBlocks& kv, Reference64& r, std::vector<double>& raw)
      : in_(in),
        p_(in.params),
        st_(st),
        kv_(kv),
        r_(r),
        b_(bkv / p_.kv_heads),
        first_(bkv * p_.group_size()),
        local0_((bkv - bkv0) * p_.group_size()),
        fill_(mask_fill_value(p_.mask_fill, p_.precision)),
        dk_(r.dk.data() + (bkv - bkv0) * p_.seqlen_k * p_.head_dim),
        dv_(r.dv.data() + (bkv - bkv0) * p_.seqlen_k * p_.head_dim_v) {
    const int64_t Sq = p_.seqlen_q, D = p_.head_dim, Dv = p_.head_dim_v;
    for (int64_t x = 0; x < p_.group_size(); ++x) {
      bool finite = kv.k_finite && kv.v_finite;
      read(in.q, (first_ + x) * Sq * D, Sq * D, raw);
      finite = finite && all_finite(raw);
      if (in.dout) read(in.dout, (first_ + x) * Sq * Dv, Sq * Dv, raw);
      skip_.push_back(finite && (!in.dout || all_finite(raw)));
    }
  }

  int64_t blocks() const { return (p_.seqlen_q + kRowBlock - 1) / kRowBlock; }
  int64_t tiles() const { return (p_.seqlen_k + kKeyTile - 1) / kKeyTile; }

  // Every term, dq, dk and dv together.
  void all(Scratch& w, const std::function<bool()>& stop) {
    for (int64_t x = 0; x < p_.group_size(); ++x) {
      for (int64_t i0 = 0; i0 < p_.seqlen_q; i0 += kRowBlock) {
        if (stop()) return;
        const int64_t last = block(x, i0, w);
        for (int64_t t0 = 0; t0 < last; t0 += kKeyTile) {
          if (!tile(x, i0, t0, w)) continue;
          update_dq(x, i0, t0, w);
          update_dk_dv(t0, w);
        }
      }
    }
  }
  // dk and dv of the key tiles t = part, part + parts, ... over every head and block in order.
  void keys(int64_t part, int64_t parts, Scratch& w, const std::function<bool()>& stop) {
    for (int64_t x = 0; x < p_.group_size(); ++x) {
      for (int64_t i0 = 0; i0 < p_.seqlen_q; i0 += kRowBlock) {
        if (stop()) return;
        const int64_t last = block(x, i0, w);
        for (int64_t t0 = part * kKeyTile; t0 < last; t0 += parts * kKeyTile) {
          if (tile(x, i0, t0, w)) update_dk_dv(t0, w);
        }
      }
    }
  }
  // dq of block i0 of head x over every key tile in order.
  void rows(int64_t x, int64_t i0, Scratch& w) {
    const int64_t last = block(x, i0, w);
    for (int64_t t0 = 0; t0 < last; t0 += kKeyTile) {
      if (tile(x, i0, t0, w)) update_dq(x, i0, t0, w);
    }
  }

 private:
  double p_of(int64_t x, int64_t i, double s) const {
    const int64_t ri = (local0_ + x) * p_.seqlen_q + i;
    if (st_.m[at(ri)] == -kInf && p_.mask_fill == MaskFill::safe) return 0.0;
    return p_.backward_p == BackwardP::saved ? std::exp(s - st_.m[at(ri)]) / st_.l[at(ri)]
                                             : std::exp(s - r_.lse[at(ri)]);
  }

  // Rows [i0, i0 + w.rows) of head x: q and dO laid out for the products (w.qb, w.db; dO = 1
  // without a recorded dO), d_i = dO_i . o_i, and the keys each row may add something with
  // (w.reach): keys from visible_key_end on are hidden by causality, and where their p is 0
  // and the inputs are finite they add nothing. Returns the end of the keys any row reaches.
  int64_t block(int64_t x, int64_t i0, Scratch& w) const {
    const int64_t Sq = p_.seqlen_q, Sk = p_.seqlen_k, D = p_.head_dim, Dv = p_.head_dim_v;
    const int64_t rows = std::min(kRowBlock, Sq - i0), row0 = (first_ + x) * Sq + i0;
    w.rows = rows;
    w.s.resize(at(kRowBlock * kKeyTile));  // the forward sized it for its own rows
    read(in_.q, row0 * D, rows * D, w.raw);
    copy_rows(w.raw.data(), D, rows, D, w.qb);
    if (in_.dout) {
      read(in_.dout, row0 * Dv, rows * Dv, w.raw);
    } else {
      w.raw.assign(at(Dv), 1.0);
    }
    copy_rows(w.raw.data(), in_.dout ? Dv : 0, rows, Dv, w.db);
    int64_t last = 0;
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = i0 + row;
      cpu::exact_dot_block(1, 1, Dv, w.db.data() + row * padded(Dv), 0,
                           r_.o.data() + ((local0_ + x) * Sq + i) * Dv, 1, &w.d[at(row)], 1);
      w.reach[at(row)] = skip_[at(x)] && p_of(x, i, fill_) == 0 ? visible_key_end(p_, i + 1) : Sk;
      last = std::max(last, w.reach[at(row)]);
    }
    return last;
  }

  // The terms of the block's rows with key tile [t0, t0 + kKeyTile): g [row, key] (w.g),
  // its transpose (w.gt) and p z [key, row] (w.wt), 0 where a term adds nothing; rows
  // [w.lo, w.hi) hold every row that adds. False when none does.
  bool tile(int64_t x, int64_t i0, int64_t t0, Scratch& w) const {
    const AttnParams& p = p_;
    const int64_t T = kKeyTile, R = kRowBlock, D = p.head_dim, Dv = p.head_dim_v;
    const int64_t t1 = std::min(t0 + T, p.seqlen_k), nt = t1 - t0;
    const int64_t h = (first_ + x) % p.heads;
    w.lo = w.rows;
    w.hi = 0;
    for (int64_t row = 0; row < w.rows; ++row) {
      w.end[at(row)] = std::clamp(w.reach[at(row)], t0, t1);
      if (w.end[at(row)] > t0) {
        w.lo = std::min(w.lo, row);
        w.hi = row + 1;
      }
    }
    if (w.lo >= w.hi) return false;
    const int64_t n_rows = w.hi - w.lo;
    cpu::exact_dot_block(n_rows, nt, D, w.qb.data() + w.lo * padded(D), padded(D),
                         kv_.k_tile(t0, D), padded(T), w.s.data() + w.lo * T, T);
    cpu::exact_dot_block(n_rows, nt, Dv, w.db.data() + w.lo * padded(Dv), padded(Dv),
                         kv_.v_tile(t0, Dv), padded(T), w.dp.data() + w.lo * T, T);
    for (int64_t row = w.lo; row < w.hi; ++row) {
      const int64_t i = i0 + row;
      for (int64_t jj = 0; jj < nt; ++jj) {
        const int64_t j = t0 + jj;
        double wij = 0, gij = 0;
        if (j < w.end[at(row)]) {
          double s = fill_, factor = 0;  // the score and d s / d(scale q.k)
          if (!is_masked(p, b_, h, i, j)) {
            s = p.scale * w.s[at(row * T + jj)];
            factor = 1;
            if (p.softcap > 0) {
              const double t = std::tanh(s / p.softcap);
              s = p.softcap * t;
              factor = 1 - t * t;
            }
            s += bias_at(p, b_, h, i, j);
          }
          const double z = dropout_factor(p, b_, h, i, j);
          const double pij = p_of(x, i, s);
          wij = pij * z;
          gij = p.scale * (pij * (z * w.dp[at(row * T + jj)] - w.d[at(row)]) * factor);
        }
        w.g[at(row * T + jj)] = gij;
        w.gt[at(jj * R + row)] = gij;
        w.wt[at(jj * R + row)] = wij;
      }
    }
    return true;
  }

  void update_dq(int64_t x, int64_t i0, int64_t t0, Scratch& w) const {
    const int64_t T = kKeyTile, D = p_.head_dim, nt = std::min(T, p_.seqlen_k - t0);
    double* dq = r_.dq.data() + ((local0_ + x) * p_.seqlen_q + i0 + w.lo) * D;
    cpu::exact_gemm_update(w.hi - w.lo, D, nt, w.g.data() + w.lo * T, T,
                           kv_.kb.data() + t0 * padded(D), padded(D), dq, D);
  }
  void update_dk_dv(int64_t t0, Scratch& w) const {
    const int64_t D = p_.head_dim, Dv = p_.head_dim_v, nt = std::min(kKeyTile, p_.seqlen_k - t0);
    const int64_t n_rows = w.hi - w.lo;
    cpu::exact_gemm_update(nt, D, n_rows, w.gt.data() + w.lo, kRowBlock,
                           w.qb.data() + w.lo * padded(D), padded(D), dk_ + t0 * D, D);
    cpu::exact_gemm_update(nt, Dv, n_rows, w.wt.data() + w.lo, kRowBlock,
                           w.db.data() + w.lo * padded(Dv), padded(Dv), dv_ + t0 * Dv, Dv);
  }

  const ReferenceInputs& in_;
  const AttnParams& p_;
  const RowStats& st_;
  const KvBlocks& kv_;
  Reference64& r_;
  const int64_t b_;       // batch
  const int64_t first_;   // the group's first query head, b * H + g * G
  const int64_t local0_;  // its index in r
  const double fill_;
  double* const dk_;
  double* const dv_;
  std::vector<uint8_t> skip_;  // per head of the group: a zero-weight term adds nothing
};

}  // namespace

ReferenceInputs reference_inputs(const CaseInputs& in) {
  return {in.params, values_of(in.q), values_of(in.k), values_of(in.v),
          in.has_dout ? values_of(in.dout) : ValueReader{}};
}

ReferenceInputs reference_inputs(const CaseData& data, const AttnParams& params) {
  const HostTensor* dout = data.find("do");
  return {params, values_of(data.q()), values_of(data.k()), values_of(data.v()),
          dout != nullptr ? values_of(*dout) : ValueReader{}};
}

namespace {

// Bytes a round of stream_reference64 holds per (batch, kv group): o, lse, dq of its query
// heads, dk, dv of its kv head and the rows' m, l.
int64_t group_bytes(const AttnParams& p, bool gradients) {
  const int64_t G = p.group_size(), Sq = p.seqlen_q, Sk = p.seqlen_k;
  const int64_t per_row = p.head_dim_v + 1 + (gradients ? p.head_dim + 2 : 0);
  return 8 * (G * Sq * per_row + (gradients ? Sk * (p.head_dim + p.head_dim_v) : 0));
}

// The reference of the (batch, kv group) pairs [bkv0, bkv1): its forward over their query
// heads (work items of rows), then their backward: a pair per worker, or with fewer pairs than
// workers, the workers sharing each pair (GroupBackward::keys, then rows).
Reference64 reference_round(const ReferenceInputs& in, int64_t bkv0, int64_t bkv1, bool gradients,
                            const std::function<bool()>& stop, std::vector<Scratch>& scratch) {
  const AttnParams& p = in.params;
  const int64_t G = p.group_size(), Sq = p.seqlen_q, Sk = p.seqlen_k, n = bkv1 - bkv0;
  const int64_t heads = n * G;
  Reference64 r;
  r.o.assign(at(heads * Sq * p.head_dim_v), 0.0);
  r.lse.assign(at(heads * Sq), 0.0);
  r.has_gradients = gradients;
  if (!gradients) {
    forward(in, bkv0 * G, bkv1 * G, stop, scratch, r, nullptr);
    return r;
  }
  RowStats stats;
  stats.m.assign(at(heads * Sq), 0.0);
  stats.l.assign(at(heads * Sq), 0.0);
  forward(in, bkv0 * G, bkv1 * G, stop, scratch, r, &stats);
  r.dq.assign(at(heads * Sq * p.head_dim), 0.0);
  r.dk.assign(at(n * Sk * p.head_dim), 0.0);
  r.dv.assign(at(n * Sk * p.head_dim_v), 0.0);
  const int workers = static_cast<int>(scratch.size());
  if (n >= workers) {  // a group per worker
    cpu::parallel_for(n, workers, [&](int64_t item, int worker) {
      if (stop()) return;
      Scratch& w = scratch[at(worker)];
      w.kv.prepare(in, bkv0 + item, w.raw);
      GroupBackward(in, bkv0 + item, bkv0, stats, w.kv, r, w.raw).all(w, stop);
    });
    return r;
  }
  // Fewer groups than workers (an MQA layer of batch 1): the workers share each group.
  KvBlocks kv;
  for (int64_t bkv = bkv0; bkv < bkv1 && !stop(); ++bkv) {
    kv.prepare(in, bkv, scratch[0].raw);
    GroupBackward group(in, bkv, bkv0, stats, kv, r, scratch[0].raw);
    const int64_t parts = std::min<int64_t>(workers, group.tiles());
    cpu::parallel_for(parts, workers, [&](int64_t part, int worker) {
      group.keys(part, parts, scratch[at(worker)], stop);
    });
    cpu::parallel_for(G * group.blocks(), workers, [&](int64_t item, int worker) {
      if (!stop())
        group.rows(item / group.blocks(), item % group.blocks() * kRowBlock, scratch[at(worker)]);
    });
  }
  return r;
}

}  // namespace

Reference64 compute_reference64(const ReferenceInputs& in, bool gradients, int threads,
                                const std::function<bool()>& cancelled) {
  const AttnParams& p = in.params;
  std::vector<Scratch> scratch(at(cpu::resolve_threads(threads)));
  auto stop = [&] { return cancelled && cancelled(); };
  return reference_round(in, 0, p.batch * p.kv_heads, gradients, stop, scratch);
}

void stream_reference64(const ReferenceInputs& in, bool gradients, int threads,
                        const std::function<void(const GroupReference&)>& each,
                        const std::function<bool()>& cancelled, int64_t round_bytes) {
  const AttnParams& p = in.params;
  const int64_t G = p.group_size(), Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  const int64_t Dv = p.head_dim_v, groups = p.batch * p.kv_heads;
  std::vector<Scratch> scratch(at(cpu::resolve_threads(threads)));
  auto stop = [&] { return cancelled && cancelled(); };
  const int64_t per_round =
      std::max<int64_t>(static_cast<int64_t>(scratch.size()),
                        round_bytes / std::max<int64_t>(group_bytes(p, gradients), 1));
  for (int64_t bkv0 = 0; bkv0 < groups && !stop(); bkv0 += per_round) {
    const int64_t bkv1 = std::min(groups, bkv0 + per_round);
    const Reference64 r = reference_round(in, bkv0, bkv1, gradients, stop, scratch);
    for (int64_t bkv = bkv0; bkv < bkv1 && !stop(); ++bkv) {
      const int64_t x = bkv - bkv0;
      GroupReference group;
      group.b = bkv / p.kv_heads;
      group.g = bkv % p.kv_heads;
      group.o = r.o.data() + x * G * Sq * Dv;
      group.lse = r.lse.data() + x * G * Sq;
      if (gradients) {
        group.dq = r.dq.data() + x * G * Sq * D;
        group.dk = r.dk.data() + x * Sk * D;
        group.dv = r.dv.data() + x * Sk * Dv;
      }
      each(group);
    }
  }
}

}  // namespace attnscope
