// Per-tile recording of the CPU attention instrumentation (see trace_recorder.h); the
// resolution into provenance codes and norms lives in trace_provenance.cpp.
#include "kernels/cpu/trace_recorder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attn_check.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_scan.h"

namespace attnscope::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

// Accumulator bounds at most this prove an fp32 accumulator finite: 34x below FLT_MAX, far more
// than the rounding of bf16 / fp16 operands and of fp32 sums can add.
constexpr double kSafeBound = 1e37;

// The largest of row maxima [n] (magnitudes), +inf when one is not finite: one vector pass.
float largest_of(const float* row_max, int64_t n) {
  const float largest = largest_magnitude(row_max, n);
  return magnitude_finite(largest) ? largest : kInf;
}

// From PreparedInputs' row maxima of an input with rows_per_head rows per head: head_max[h] =
// the largest magnitude over head h's rows (+inf when one is not finite); bad (if given)[i] = 1
// when row i holds a non-finite value.
void rows_and_heads(const std::vector<float>& row_max, int64_t rows_per_head,
                    std::vector<float>& head_max, std::vector<uint8_t>* bad = nullptr) {
  if (bad != nullptr) bad->assign(row_max.size(), 0);
  head_max.resize(row_max.size() / count(rows_per_head));
  for (size_t h = 0; h < head_max.size(); ++h) {
    const float* rows = row_max.data() + h * count(rows_per_head);
    head_max[h] = largest_of(rows, rows_per_head);
    for (int64_t r = 0; bad != nullptr && head_max[h] == kInf && r < rows_per_head; ++r) {
      (*bad)[h * count(rows_per_head) + count(r)] = !magnitude_finite(rows[r]);
    }
  }
}

// Largest term sum one tile update adds to an accumulator entry: n products of magnitudes at most
// a and b, times `scale` (at least 1: the unscaled sum is bounded too); +inf when a factor is not
// known finite and small enough to round to a finite bf16 / fp16.
double update_bound(int64_t n, double a, double b, double scale) {
  if (!(a <= kSafeBound && b <= kSafeBound)) return kInf;
  return static_cast<double>(n) * a * b * std::max(1.0, std::fabs(scale));
}

// Non-finite counts of an accumulator [rows x dim] whose entries are bounded by `bound`: none
// when the bound proves them finite, else a scan, which tightens the bound to the largest
// magnitude found (+inf once non-finite: an accumulator never returns to finite).
NonfiniteCount accumulator_count(const float* acc, int64_t rows, int64_t dim, double& bound) {
  if (bound <= kSafeBound) return {};
  const float largest = largest_magnitude(acc, rows * dim);
  if (magnitude_finite(largest)) {
    bound = largest;
    return {};
  }
  bound = kInf;
  return count_block(acc, rows, dim, dim);
}

// Empty every array of a trace half but keep its storage: a repeated run (a slider move, a bench
// rep) refills arrays of the same sizes without faulting their pages in again.
void reset(ForwardTrace& f) {
  f.valid = false;
  for (std::vector<float>* v : {&f.m, &f.l, &f.lse, &f.o_max_abs}) v->clear();
  f.tiles.clear();
  f.o_provenance.clear();
  f.lse_provenance.clear();
}

// The gradient codes keep their size as well (finish_backward rewrites every entry, in
// parallel), so that a run of the same shape does not clear them serially first.
void reset(BackwardTrace& b) {
  b.valid = false;
  for (std::vector<float>* v : {&b.d, &b.dq_row_norm, &b.dk_row_norm, &b.dv_row_norm}) v->clear();
  for (std::vector<double>* v : {&b.dq_head_norm, &b.dk_head_norm, &b.dv_head_norm}) v->clear();
  b.tiles.clear();
}

}  // namespace

TraceRecorder::TraceRecorder(const AttnParams& params, Mode mode, const PreparedInputs& in,
                             bool backward, int threads, CpuTrace& trace)
    : prm_(params), in_(in), threads_(threads), trace_(trace), backward_(backward) {
  const int64_t B = params.batch, H = params.heads, Hk = params.kv_heads;
  const int64_t Sq = params.seqlen_q, Sk = params.seqlen_k, D = params.head_dim;
  n_q_ = tile_count(Sq, kTileRows);
  n_kv_ = tile_count(Sk, kTileCols);
  if (backward) {
    reset(trace.backward);
  } else {
    reset(trace.forward);
  }
  trace.batch = B;
  trace.heads = H;
  trace.kv_heads = Hk;
  trace.seqlen_q = Sq;
  trace.seqlen_k = Sk;
  trace.head_dim = D;
  trace.head_dim_v = params.head_dim_v;
  trace.tile_rows = kTileRows;
  trace.tile_cols = kTileCols;
  trace.q_tiles = n_q_;
  trace.kv_tiles = n_kv_;
  const HeadContext x = make_head_context(params, mode, 0, 0);
  safe_ = x.safe;
  fill_overflowed_ = x.fill == -kInf && (params.mask_fill == MaskFill::neg_1e9 ||
                                         params.mask_fill == MaskFill::finfo_min);

  const int64_t rows = B * H * Sq;
  rows_and_heads(in.q_max, Sq, q_head_max_, &q_bad_);
  if (backward) rows_and_heads(in.dout_max, Sq, dout_head_max_, &dout_bad_);
  std::vector<float> k_head_max, v_head_max;
  rows_and_heads(in.k_max, Sk, k_head_max);
  rows_and_heads(in.v_max, Sk, v_head_max);
  k_tile_max_.resize(count(B * Hk * n_kv_));
  for (int64_t tile = 0; tile < B * Hk * n_kv_; ++tile) {
    const int64_t j0 = (tile % n_kv_) * kTileCols, row0 = (tile / n_kv_) * Sk + j0;
    k_tile_max_[count(tile)] = largest_of(in.k_max.data() + row0, std::min(kTileCols, Sk - j0));
  }
  k_head_bad_.assign(count(B * Hk), 0);
  v_head_bad_.assign(count(B * Hk), 0);
  v_head_large_.assign(count(B * Hk), 0);
  for (int64_t bkv = 0; bkv < B * Hk; ++bkv) {
    k_head_bad_[count(bkv)] = !magnitude_finite(k_head_max[count(bkv)]);
    const float largest = v_head_max[count(bkv)];
    v_head_bad_[count(bkv)] = !magnitude_finite(largest);
    v_head_large_[count(bkv)] =
        magnitude_finite(largest) && static_cast<double>(Sk) * largest > 1e37;
  }
  row_flags_.assign(count(rows), 0);
  col_flags_.assign(count(B * Hk * n_kv_), 0);
  (backward ? trace.backward.tiles : trace.forward.tiles).assign(count(B * H * n_q_ * n_kv_), {});
  if (backward) {
    row_clean_.assign(count(rows), 0);
    row_m_.assign(count(rows), std::numeric_limits<float>::quiet_NaN());
    block_m_finite_.assign(count(rows), 0);
    block_p_finite_.assign(count(rows), 0);
    dk_bound_.assign(count(B * Hk * n_kv_), 0.0);
    dv_bound_.assign(count(B * Hk * n_kv_), 0.0);
  }
}

void TraceRecorder::dq_partials(int64_t n) {
  dq_bound_.assign(count(n * prm_.batch * prm_.heads * n_q_), 0.0);
}

TileStats& TraceRecorder::tile(bool backward, const HeadContext& x, int64_t qt, int64_t kt) {
  std::vector<TileStats>& tiles = backward ? trace_.backward.tiles : trace_.forward.tiles;
  return tiles[count(trace_.tile_index(x.b, x.h, qt, kt))];
}

// Flags are OR-ed from several workers in the fused backward; OR commutes, so the result is
// independent of the schedule.
void TraceRecorder::set_row(int64_t row, uint8_t flags) {
  uint8_t& f = row_flags_[count(row)];
  if ((__atomic_load_n(&f, __ATOMIC_RELAXED) & flags) != flags) {
    __atomic_fetch_or(&f, flags, __ATOMIC_RELAXED);
  }
}

void TraceRecorder::set_col(int64_t col, uint8_t flags) {
  __atomic_fetch_or(&col_flags_[count(col)], flags, __ATOMIC_RELAXED);
}

bool TraceRecorder::bias_row_bad(const HeadContext& x, const ScoreTile& t, int64_t r) const {
  if (prm_.bias == nullptr) return false;
  const BroadcastStrides& st = prm_.bias_strides;
  const double* b_r = prm_.bias + x.b * st.b + x.h * st.h + (t.i0 + r) * st.q + t.j0 * st.k;
  for (int64_t c = 0; c < t.cols; ++c) {
    const double v = b_r[c * st.k];
    if (std::isnan(v) || v == std::numeric_limits<double>::infinity()) return true;
  }
  return false;
}

bool TraceRecorder::scan_scores(const HeadContext& x, const ScoreTile& t, const float* s,
                                const float* m, TileStats& ts, const BlockMax* known) {
  const int64_t row0 = (x.b * prm_.heads + x.h) * prm_.seqlen_q + t.i0;
  const int64_t bkv = x.b * prm_.kv_heads + prm_.kv_head_of(x.h);
  const bool k_bad = k_tile_max_[count(bkv * n_kv_ + t.j0 / kTileCols)] == kInf;
  const bool per_entry = needs_mask_classes(prm_);
  // Fast path: a tile whose visible scores (all, or a causal staircase) are finite without an
  // exp overflow needs only their maxima. Rows with a non-finite m take no part in the exp
  // argument (shift +inf gives -inf).
  if (!per_entry) {
    ATTNSCOPE_DCHECK(t.rows <= kTileRows);
    int64_t visible[kTileRows];
    int64_t masked = 0;
    for (int64_t r = 0; prm_.causal && r < t.rows; ++r) {
      visible[r] = causal_visible_cols(prm_, t, r);
      masked += t.cols - visible[r];
    }
    float max_arg = 0, max_abs = 0;
    bool clean = false;
    if (masked == 0 && known != nullptr && known->finite) {
      // Every shift is m (the caller checked that every m is finite): known holds what
      // finite_block_max would give.
      clean = true;
      max_arg = known->max_shifted;
      max_abs = known->max_abs;
    } else {
      float shift[kTileRows];
      for (int64_t r = 0; r < t.rows; ++r) shift[r] = std::isfinite(m[r]) ? m[r] : kInf;
      clean = finite_block_max(s, t.rows, t.cols, t.ld, shift, &max_arg, &max_abs,
                               masked > 0 ? visible : nullptr);
    }
    if (clean && max_arg <= kExpOverflowArg) {
      ts.max_abs_s = std::max(ts.max_abs_s, max_abs);
      ts.max_exp_arg = std::max(ts.max_exp_arg, max_arg);
      ts.masked += static_cast<int32_t>(masked);
      for (int64_t r = 0; fill_overflowed_ && masked > 0 && r < t.rows; ++r) {
        if (visible[r] < t.cols) set_row(row0 + r, kCauseFillMasked);
      }
      return true;
    }
  }
  thread_local std::vector<uint8_t> cls;
  if (per_entry) {
    cls.resize(count(t.rows * t.cols));
    mask_classes(x, t, cls.data());
  }
  for (int64_t r = 0; r < t.rows; ++r) {
    const ScoreRowStats rs = score_row_stats(s + r * t.ld, t.cols, causal_visible_cols(prm_, t, r),
                                             per_entry ? cls.data() + r * t.cols : nullptr);
    ts.max_abs_s = std::max(ts.max_abs_s, rs.max_abs);
    ts.masked += rs.masked;
    ts.s += rs.nonfinite;
    uint8_t flags = 0;
    if (std::isfinite(m[r]) && rs.max > -kInf) {
      const float arg = rs.max - m[r];
      ts.max_exp_arg = std::max(ts.max_exp_arg, arg);
      if (arg > kExpOverflowArg) flags |= kCauseExpOverflow;
    }
    if (rs.fill_masked > 0 && fill_overflowed_) flags |= kCauseFillMasked;
    if (rs.nonfinite.total() > 0) {
      if (q_bad_[count(row0 + r)] || k_bad || bias_row_bad(x, t, r)) {
        flags |= kCauseInput;
      } else {
        if (rs.nonfinite.nan + rs.nonfinite.pos_inf > 0) flags |= kCauseScoreOverflow;
        if (rs.nonfinite.neg_inf > 0) flags |= kCauseScoreNegInf;
      }
    }
    if (flags != 0) set_row(row0 + r, flags);
  }
  return false;
}

bool TraceRecorder::p_row_finite(float m, const float* l) const {
  return (safe_ && m == -kInf) || (std::isfinite(m) && (l == nullptr || *l >= 1.0f));
}

void TraceRecorder::forward_tile(const HeadContext& x, const ScoreTile& t, const float* s,
                                 const float* p, const float* m, const float* acc,
                                 const BlockMax* s_max) {
  const int64_t qt = t.i0 / kTileRows, jt = t.j0 / kTileCols;
  TileStats& ts = tile(false, x, qt, jt);
  ts.computed = 1;
  const BlockMax* known = s_max != nullptr && all_finite(m, t.rows) ? s_max : nullptr;
  bool p_finite = scan_scores(x, t, s, m, ts, known);
  // Every m finite (known) makes every row's P finite from clean scores.
  for (int64_t r = 0; p_finite && known == nullptr && r < t.rows; ++r) {
    p_finite = p_row_finite(m[r], nullptr);
  }
  if (!p_finite) ts.p = count_block(p, t.rows, t.cols, t.ld);
  // acc += P V stays finite from finite P <= 1 and finite V whose sums cannot overflow.
  const int64_t bkv = x.b * prm_.kv_heads + prm_.kv_head_of(x.h);
  const bool acc_was_finite = jt == 0 || tile(false, x, qt, jt - 1).acc.total() == 0;
  if (!(p_finite && acc_was_finite && !v_head_bad_[count(bkv)] && !v_head_large_[count(bkv)])) {
    ts.acc = count_block(acc, t.rows, x.dim_v, x.dim_v);
  }
}

void TraceRecorder::forward_rows(const HeadContext& x, const ScoreTile& t, const float* s,
                                 const float* p, const float* m) {
  for (int64_t j0 = 0; j0 < t.cols; j0 += kTileCols) {
    const ScoreTile sub{t.i0, j0, t.rows, std::min(kTileCols, t.cols - j0), t.ld};
    TileStats& ts = tile(false, x, t.i0 / kTileRows, j0 / kTileCols);
    ts.computed = 1;
    scan_scores(x, sub, s + j0, m, ts);
    ts.p = count_block(p + j0, sub.rows, sub.cols, t.ld);
  }
}

void TraceRecorder::skipped_tile(const HeadContext& x, const ScoreTile& t) {
  TileStats& ts = tile(backward_, x, t.i0 / kTileRows, t.j0 / kTileCols);
  ts.computed = 0;
  ts.masked = static_cast<int32_t>(t.rows * t.cols);
}

void TraceRecorder::rows_ready(int64_t bh, int64_t i0, int64_t rows, const float* m, const float* l,
                               const float* d) {
  const size_t row0 = count(bh * prm_.seqlen_q + i0);
  bool m_finite = true, p_finite = true;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t row = row0 + count(r);
    row_m_[row] = m[r];
    const bool safe_empty = safe_ && m[r] == -kInf;
    row_clean_[row] = !q_bad_[row] && !dout_bad_[row] && (d == nullptr || std::isfinite(d[r])) &&
                      (safe_empty || (std::isfinite(m[r]) && std::isfinite(l[r])));
    m_finite &= std::isfinite(m[r]);
    p_finite &= p_row_finite(m[r], l + r);
  }
  block_m_finite_[row0] = m_finite;
  block_p_finite_[row0] = p_finite;
}

void TraceRecorder::classify_gradients(const HeadContext& x, const ScoreTile& t,
                                       const BackwardBlock& blk) {
  const int64_t row0 = (x.b * prm_.heads + x.h) * prm_.seqlen_q + t.i0;
  const int64_t bkv = x.b * prm_.kv_heads + prm_.kv_head_of(x.h);
  const int64_t col = bkv * n_kv_ + t.j0 / kTileCols;
  const bool kv_bad = k_tile_max_[count(col)] == kInf || v_head_bad_[count(bkv)];
  uint8_t col_flags = 0;
  for (int64_t r = 0; r < t.rows; ++r) {
    const int64_t p_bad = count_nonfinite(blk.p + r * t.ld, t.cols);
    const int64_t g_bad =
        count_nonfinite(blk.dp + r * t.ld, t.cols) + count_nonfinite(blk.ds + r * t.ld, t.cols);
    if (p_bad + g_bad == 0) continue;
    if (!row_clean_[count(row0 + r)] || kv_bad) {
      col_flags |= kColArrived;
    } else if (p_bad > 0) {
      set_row(row0 + r, kCauseExpOverflow);
      col_flags |= kColArrived;
    } else {
      set_row(row0 + r, kCauseGradOverflow);
      col_flags |= kColBorn;
    }
  }
  if (col_flags != 0) set_col(col, col_flags);
}

void TraceRecorder::count_accumulators(const HeadContext& x, const ScoreTile& t,
                                       const BackwardBlock& b, bool p_finite, TileStats& ts) {
  ATTNSCOPE_DCHECK(t.cols <= kTileCols && b.dq_partial >= 0);
  const int64_t bh = x.b * prm_.heads + x.h;
  const size_t kv_tile =
      count((x.b * prm_.kv_heads + prm_.kv_head_of(x.h)) * n_kv_ + t.j0 / kTileCols);
  const size_t dq_rows =
      count((b.dq_partial * prm_.batch * prm_.heads + bh) * n_q_ + t.i0 / kTileRows);
  ATTNSCOPE_DCHECK(dq_rows < dq_bound_.size());
  // P = exp(S - m) / l <= exp(max exp argument) < 2 with l >= 1 where p_finite holds.
  const double p_max = p_finite && ts.max_exp_arg <= 0.69f ? 2.0 : kInf;
  // dQ_i += scale dS K_j, dK_j += scale dS^T Q_i, dV_j += P^T dO_i (P dropped: at most P).
  dq_bound_[dq_rows] += update_bound(t.cols, b.ds_max_abs, k_tile_max_[kv_tile], x.scale);
  dk_bound_[kv_tile] += update_bound(t.rows, b.ds_max_abs, q_head_max_[count(bh)], x.scale);
  dv_bound_[kv_tile] += update_bound(t.rows, p_max, dout_head_max_[count(bh)], 1.0);
  ts.dq = accumulator_count(b.dq_acc, t.rows, x.dim, dq_bound_[dq_rows]);
  ts.dk = accumulator_count(b.dk_acc, t.cols, x.dim, dk_bound_[kv_tile]);
  ts.dv = accumulator_count(b.dv_acc, t.cols, x.dim_v, dv_bound_[kv_tile]);
}

void TraceRecorder::backward_tile(const HeadContext& x, const ScoreTile& t,
                                  const BackwardBlock& blk) {
  for (int64_t j0 = t.j0; j0 < t.j0 + t.cols; j0 += kTileCols) {
    const ScoreTile sub{t.i0, j0, t.rows, std::min(kTileCols, t.j0 + t.cols - j0), t.ld};
    const int64_t off = j0 - t.j0;
    BackwardBlock b = blk;
    b.s += off;
    b.p += off;
    b.dp += off;
    b.ds += off;
    TileStats& ts = tile(true, x, t.i0 / kTileRows, j0 / kTileCols);
    ts.computed = 1;
    // The block's rows are those of one rows_ready call: their m / l flags are known.
    const size_t row0 = count((x.b * prm_.heads + x.h) * prm_.seqlen_q + t.i0);
    const BlockMax* known = sub.cols == t.cols && block_m_finite_[row0] ? b.s_max : nullptr;
    const bool p_finite = scan_scores(x, sub, b.s, b.m, ts, known) && block_p_finite_[row0];
    if (!p_finite) ts.p = count_block(b.p, sub.rows, sub.cols, t.ld);
    if (!magnitude_finite(b.ds_max_abs)) {
      ts.dp = count_block(b.dp, sub.rows, sub.cols, t.ld);
      ts.ds = count_block(b.ds, sub.rows, sub.cols, t.ld);
    }
    if (b.dq_acc != nullptr) count_accumulators(x, sub, b, p_finite, ts);
    if (ts.p.total() + ts.dp.total() + ts.ds.total() > 0) classify_gradients(x, sub, b);
  }
}

}  // namespace attnscope::cpu
