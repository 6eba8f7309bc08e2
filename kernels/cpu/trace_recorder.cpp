// Per-tile recording of the CPU attention instrumentation (see trace_recorder.h); the
// resolution into provenance codes and norms lives in trace_provenance.cpp.
#include "kernels/cpu/trace_recorder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_scan.h"

namespace attnscope::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

// flags[i] = 1 when row i of x [rows x dim] holds a non-finite value.
std::vector<uint8_t> bad_rows(const float* x, int64_t rows, int64_t dim, int threads) {
  std::vector<uint8_t> bad(count(rows));
  constexpr int64_t kChunk = 256;
  parallel_for(tile_count(rows, kChunk), threads, [&](int64_t chunk, int) {
    for (int64_t r = chunk * kChunk; r < std::min(rows, (chunk + 1) * kChunk); ++r) {
      bad[count(r)] = !all_finite(x + r * dim, dim);
    }
  });
  return bad;
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
    trace.backward = {};
  } else {
    trace.forward = {};
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
  q_bad_ = bad_rows(in.q, rows, D, threads);
  if (backward) dout_bad_ = bad_rows(in.dout, rows, params.head_dim_v, threads);
  k_tile_bad_.assign(count(B * Hk * n_kv_), 0);
  parallel_for(B * Hk * n_kv_, threads, [&](int64_t item, int) {
    const int64_t j0 = (item % n_kv_) * kTileCols, cols = std::min(kTileCols, Sk - j0);
    k_tile_bad_[count(item)] = !all_finite(in.k + ((item / n_kv_) * Sk + j0) * D, cols * D);
  });
  k_head_bad_.assign(count(B * Hk), 0);
  for (int64_t tile = 0; tile < B * Hk * n_kv_; ++tile) {
    k_head_bad_[count(tile / n_kv_)] |= k_tile_bad_[count(tile)];
  }
  v_head_bad_.assign(count(B * Hk), 0);
  v_head_large_.assign(count(B * Hk), 0);
  parallel_for(B * Hk, threads, [&](int64_t bkv, int) {
    float max_abs = 0, max = 0;
    const int64_t n = Sk * params.head_dim_v;
    v_head_bad_[count(bkv)] = finite_max(in.v + bkv * n, n, &max_abs, &max) > 0;
    v_head_large_[count(bkv)] = static_cast<double>(Sk) * max_abs > 1e37;
  });
  row_flags_.assign(count(rows), 0);
  col_flags_.assign(count(B * Hk * n_kv_), 0);
  (backward ? trace.backward.tiles : trace.forward.tiles).assign(count(B * H * n_q_ * n_kv_), {});
  if (backward) {
    row_clean_.assign(count(rows), 0);
    row_m_.assign(count(rows), std::numeric_limits<float>::quiet_NaN());
  }
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
                                const float* m, TileStats& ts) {
  const int64_t row0 = (x.b * prm_.heads + x.h) * prm_.seqlen_q + t.i0;
  const int64_t bkv = x.b * prm_.kv_heads + prm_.kv_head_of(x.h);
  const bool k_bad = k_tile_bad_[count(bkv * n_kv_ + t.j0 / kTileCols)];
  const bool per_entry = needs_mask_classes(prm_);
  // Fast path: an unmasked, all-finite tile without an exp overflow needs only its maxima.
  // Rows with a non-finite m take no part in the exp argument (shift +inf gives -inf).
  if (!per_entry && causal_visible_cols(prm_, t, 0) == t.cols) {
    float shift[kTileRows], max_arg = 0, max_abs = 0;
    for (int64_t r = 0; r < t.rows; ++r) shift[r] = std::isfinite(m[r]) ? m[r] : kInf;
    if (finite_block_max(s, t.rows, t.cols, t.ld, shift, &max_arg, &max_abs) &&
        max_arg <= kExpOverflowArg) {
      ts.max_abs_s = std::max(ts.max_abs_s, max_abs);
      ts.max_exp_arg = std::max(ts.max_exp_arg, max_arg);
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

bool TraceRecorder::p_is_finite(bool scores_clean, int64_t rows, const float* m,
                                const float* l) const {
  bool finite = scores_clean;
  for (int64_t r = 0; finite && r < rows; ++r) {
    const bool safe_empty = safe_ && m[r] == -kInf;
    finite = safe_empty || (std::isfinite(m[r]) && (l == nullptr || l[r] >= 1.0f));
  }
  return finite;
}

void TraceRecorder::forward_tile(const HeadContext& x, const ScoreTile& t, const float* s,
                                 const float* p, const float* m, const float* acc) {
  const int64_t qt = t.i0 / kTileRows, jt = t.j0 / kTileCols;
  TileStats& ts = tile(false, x, qt, jt);
  ts.computed = 1;
  const bool p_finite = p_is_finite(scan_scores(x, t, s, m, ts), t.rows, m, nullptr);
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
  for (int64_t r = 0; r < rows; ++r) {
    const size_t row = count(bh * prm_.seqlen_q + i0 + r);
    row_m_[row] = m[r];
    const bool safe_empty = safe_ && m[r] == -kInf;
    row_clean_[row] = !q_bad_[row] && !dout_bad_[row] && (d == nullptr || std::isfinite(d[r])) &&
                      (safe_empty || (std::isfinite(m[r]) && std::isfinite(l[r])));
  }
}

void TraceRecorder::classify_gradients(const HeadContext& x, const ScoreTile& t,
                                       const BackwardBlock& blk) {
  const int64_t row0 = (x.b * prm_.heads + x.h) * prm_.seqlen_q + t.i0;
  const int64_t bkv = x.b * prm_.kv_heads + prm_.kv_head_of(x.h);
  const int64_t col = bkv * n_kv_ + t.j0 / kTileCols;
  const bool kv_bad = k_tile_bad_[count(col)] || v_head_bad_[count(bkv)];
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
    if (!p_is_finite(scan_scores(x, sub, b.s, b.m, ts), sub.rows, b.m, b.l)) {
      ts.p = count_block(b.p, sub.rows, sub.cols, t.ld);
    }
    if (!b.dp_ds_finite) {
      ts.dp = count_block(b.dp, sub.rows, sub.cols, t.ld);
      ts.ds = count_block(b.ds, sub.rows, sub.cols, t.ld);
    }
    if (b.dq_acc != nullptr) {
      ts.dq = count_block(b.dq_acc, sub.rows, x.dim, x.dim);
      ts.dk = count_block(b.dk_acc, sub.cols, x.dim, x.dim);
      ts.dv = count_block(b.dv_acc, sub.cols, x.dim_v, x.dim_v);
    }
    if (ts.p.total() + ts.dp.total() + ts.ds.total() > 0) classify_gradients(x, sub, b);
  }
}

}  // namespace attnscope::cpu
