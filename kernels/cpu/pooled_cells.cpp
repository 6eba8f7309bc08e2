// Pooling of score-shaped tiles into cells (see pooled_cells.h).
#include "kernels/cpu/pooled_cells.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_scan.h"

namespace attnscope::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

using Cell = PooledCells::Cell;

constexpr Cell kEmptyCell{-kInf, kInf, 0.0, 0, 0, 0, 0, 0};

// Adds x[0:n] with mask classes cls (null: all visible) to a cell. Masked S entries hold the
// fill; masked entries of P, dP, dS count as masked only when finite.
inline void add_segment(Cell& cell, const float* x, const uint8_t* cls, int64_t n, bool is_s) {
  float mx = cell.max, mn = cell.min;
  double sum = 0;
  for (int64_t e = 0; e < n; ++e) {
    const float v = x[e];
    if (v != v) {
      ++cell.nan;
    } else if (cls != nullptr && cls[e] != kEntryVisible && (is_s || std::isfinite(v))) {
      ++cell.masked;
    } else if (std::isinf(v)) {
      ++(v > 0 ? cell.pos_inf : cell.neg_inf);
    } else {
      mx = std::max(mx, v);
      mn = std::min(mn, v);
      sum += v;
      ++cell.finite;
    }
  }
  cell.max = mx;
  cell.min = mn;
  cell.sum += sum;
}

// First pass of pooling a row group: per column c in [0, n_cols), the max, min and (kSum) sum
// of x[r][c] over rows r in [0, n_rows) (row stride ld), vectorised across columns. Returns
// false when an entry is NaN or inf (the outputs are then meaningless).
template <bool kSum>
bool pool_columns(const float* x, int64_t n_rows, int64_t n_cols, int64_t ld, float* mx, float* mn,
                  double* sum, float* check) {
  for (int64_t c = 0; c < n_cols; ++c) {
    mx[c] = mn[c] = x[c];
    if constexpr (kSum) sum[c] = x[c];
    check[c] = x[c] * 0.0f;  // NaN once an entry is NaN or inf
  }
  for (int64_t r = 1; r < n_rows; ++r) {
    const float* x_r = x + r * ld;
    for (int64_t c = 0; c < n_cols; ++c) {
      const float v = x_r[c];
      mx[c] = v > mx[c] ? v : mx[c];
      mn[c] = v < mn[c] ? v : mn[c];
      if constexpr (kSum) sum[c] += v;
      check[c] += v * 0.0f;
    }
  }
  float all = 0;
  for (int64_t c = 0; c < n_cols; ++c) all += check[c];
  return all == 0.0f;
}

// edges[e] = begin + floor(e * size / n) for e in [0, n]; pixel[i] = the cell holding begin + i;
// split[e] = 1 when cell e holds indices of more than one tile of width `tile`.
void make_edges(int64_t begin, int64_t size, int64_t n, int64_t tile, std::vector<int64_t>& edges,
                std::vector<int64_t>& pixel, std::vector<uint8_t>& split) {
  edges.resize(count(n + 1));
  for (int64_t e = 0; e <= n; ++e) edges[count(e)] = begin + e * size / n;
  pixel.resize(count(size));
  split.resize(count(n));
  for (int64_t e = 0; e < n; ++e) {
    const int64_t first = edges[count(e)], end = edges[count(e + 1)];
    for (int64_t i = first; i < end; ++i) pixel[count(i - begin)] = e;
    split[count(e)] = first / tile != (end - 1) / tile;
  }
}

}  // namespace

PooledCells::PooledCells(const HeadContext& x, MatrixWindow window, int64_t out_rows,
                         int64_t out_cols, MatrixSelection which, int64_t tile_cols, int workers,
                         bool staged)
    : x_(x),
      which_(which),
      tile_cols_(tile_cols),
      any_mask_(x.params->causal || needs_mask_classes(*x.params)),
      scratch_(count(std::max(workers, 1))),
      staged_(staged) {
  last_stage(which);  // throws when nothing is selected
  out_.window = resolve_window(*x.params, window);
  const MatrixWindow& w = out_.window;
  const int64_t R = w.row_end - w.row_begin, C = w.col_end - w.col_begin;
  out_.rows = std::clamp<int64_t>(out_rows, 1, R);
  out_.cols = std::clamp<int64_t>(out_cols, 1, C);
  make_edges(w.row_begin, R, out_.rows, kTileRows, out_.row_edges, row_pix_, row_split_);
  make_edges(w.col_begin, C, out_.cols, tile_cols, out_.col_edges, col_pix_, col_split_);
  col_split_before_.assign(count(out_.cols + 1), 0);
  for (int64_t pc = 0; pc < out_.cols; ++pc) {
    col_split_before_[count(pc + 1)] = col_split_before_[count(pc)] + col_split_[count(pc)];
  }
  split_row_base_.assign(count(out_.rows + 1), 0);
  for (int64_t pr = 0; pr < out_.rows; ++pr) {
    split_row_base_[count(pr + 1)] =
        split_row_base_[count(pr)] + (row_split_[count(pr)] ? out_.cols : col_split_before_.back());
  }
  qt0_ = w.row_begin / kTileRows;
  n_qt_ = (w.row_end - 1) / kTileRows - qt0_ + 1;
  jt0_ = w.col_begin / tile_cols;
  n_jt_ = (w.col_end - 1) / tile_cols - jt0_ + 1;

  // Every cell is written by its tile (or by finish() when split): sized, not initialised.
  PooledMatrix* mats[] = {&out_.s, &out_.p, &out_.dp, &out_.ds};
  const bool selected[] = {which.s, which.p, which.dp, which.ds};
  const size_t n_cells = count(out_.rows * out_.cols);
  for (int k = 0; k < 4; ++k) {
    if (!selected[k]) continue;
    size_cells(*mats[k], n_cells);
    partial_[k].resize(count(n_qt_ * n_jt_));
  }
  if (!staged_) return;
  stage_at_.resize(count(n_qt_ * n_jt_));
  int64_t staged_cells = 0;
  for (int64_t qt = qt0_; qt < qt0_ + n_qt_; ++qt) {
    for (int64_t jt = jt0_; jt < jt0_ + n_jt_; ++jt) {
      const TileCells tc = tile_cells(qt, jt);
      stage_at_[count((qt - qt0_) * n_jt_ + (jt - jt0_))] = staged_cells;
      staged_cells += (tc.pr1 - tc.pr0 + 1) * (tc.pc1 - tc.pc0 + 1);
    }
  }
  for (int k = 0; k < 4; ++k) {
    if (selected[k]) size_cells(stage_[k], count(staged_cells));
  }
}

bool PooledCells::overlaps(const ScoreTile& t) const {
  const MatrixWindow& w = out_.window;
  return t.i0 < w.row_end && t.i0 + t.rows > w.row_begin && t.j0 < w.col_end &&
         t.j0 + t.cols > w.col_begin;
}

PooledCells::TileCells PooledCells::tile_cells(int64_t qt, int64_t jt) const {
  const MatrixWindow& w = out_.window;
  const int64_t i_first = std::max(qt * kTileRows, w.row_begin);
  const int64_t i_last = std::min((qt + 1) * kTileRows, w.row_end) - 1;
  const int64_t c_first = std::max(jt * tile_cols_, w.col_begin);
  const int64_t c_last = std::min((jt + 1) * tile_cols_, w.col_end) - 1;
  return {row_pix_[count(i_first - w.row_begin)], row_pix_[count(i_last - w.row_begin)],
          col_pix_[count(c_first - w.col_begin)], col_pix_[count(c_last - w.col_begin)]};
}

int64_t PooledCells::split_cols(const TileCells& tc) const {
  return col_split_before_[count(tc.pc1 + 1)] - col_split_before_[count(tc.pc0)];
}

int64_t PooledCells::split_in_row(const TileCells& tc, int64_t pr) const {
  return row_split_[count(pr)] ? tc.pc1 - tc.pc0 + 1 : split_cols(tc);
}

int64_t PooledCells::split_id(int64_t pr, int64_t pc) const {
  return split_row_base_[count(pr)] + (row_split_[count(pr)] ? pc : col_split_before_[count(pc)]);
}

void PooledCells::size_cells(PooledMatrix& m, size_t n) const {
  m.max.resize(n);
  m.min.resize(n);
  if (which_.cell_counts) {
    m.mean.resize(n);
    for (std::vector<int32_t>* c : {&m.finite, &m.nan, &m.pos_inf, &m.neg_inf, &m.masked}) {
      c->resize(n);
    }
  } else {
    m.cls.resize(n);
  }
}

void PooledCells::store(PooledMatrix& m, size_t at, const Cell& c, CellCounts& t) const {
  t += {c.finite, c.nan, c.pos_inf, c.neg_inf, c.masked};
  const bool none = c.finite == 0;
  m.max[at] = none ? NAN : c.max;
  m.min[at] = none ? NAN : c.min;
  if (!which_.cell_counts) {
    m.cls[at] = cell_class(c.nan, c.pos_inf, c.neg_inf, c.finite);
    return;
  }
  m.finite[at] = c.finite;
  m.nan[at] = c.nan;
  m.pos_inf[at] = c.pos_inf;
  m.neg_inf[at] = c.neg_inf;
  m.masked[at] = c.masked;
  m.mean[at] = none ? NAN : static_cast<float>(c.sum / c.finite);
}

void PooledCells::add(const TileBlock& blk, int worker) {
  const ScoreTile& t = blk.t;
  const MatrixWindow& w = out_.window;
  const int64_t qt = t.i0 / kTileRows, jt = t.j0 / tile_cols_;
  const size_t slot = count((qt - qt0_) * n_jt_ + (jt - jt0_));
  const TileCells tc = tile_cells(qt, jt);
  const int64_t i_first = std::max(t.i0, w.row_begin);
  const int64_t i_last = std::min(t.i0 + t.rows, w.row_end) - 1;
  const int64_t c0 = std::max(t.j0, w.col_begin), c1 = std::min(t.j0 + t.cols, w.col_end);
  const bool selected[] = {which_.s, which_.p, which_.dp, which_.ds};
  int64_t n_split = 0;
  for (int64_t pr = tc.pr0; pr <= tc.pr1; ++pr) n_split += split_in_row(tc, pr);
  for (int k = 0; k < 4; ++k) {
    if (selected[k] && n_split > 0) partial_[k][slot].resize(count(n_split));
  }

  Scratch& sc = scratch_[count(worker)];
  sc.clean.assign(count(t.rows), 1);  // per tile row: every entry in [c0, c1) visible
  if (any_mask_) {
    sc.cls.resize(count(t.rows * t.cols));
    mask_classes(x_, t, sc.cls.data());
    for (int64_t r = 0; r < t.rows; ++r) {
      const uint8_t* c_r = sc.cls.data() + r * t.cols;
      sc.clean[count(r)] = std::all_of(c_r + (c0 - t.j0), c_r + (c1 - t.j0),
                                       [](uint8_t c) { return c == kEntryVisible; });
    }
  }
  const float* src[] = {blk.s, blk.p, blk.dp, blk.ds};
  PooledMatrix* mats[] = {&out_.s, &out_.p, &out_.dp, &out_.ds};
  // Rows [i, i_end) of the tile share pixel row pr; each group x pixel column is one cell part.
  int64_t row_split_at = 0;  // partials of the rows before pr
  for (int64_t i = i_first; i <= i_last;) {
    const int64_t pr = row_pix_[count(i - w.row_begin)];
    const int64_t i_end = std::min(i_last + 1, out_.row_edges[count(pr + 1)]);
    const bool group_clean =
        std::all_of(sc.clean.begin() + (i - t.i0), sc.clean.begin() + (i_end - t.i0),
                    [](uint8_t c) { return c != 0; });
    for (int k = 0; k < 4; ++k) {
      if (!selected[k]) continue;
      // Fast path: an all-visible, all-finite group is reduced over its rows per column first,
      // then per cell over its columns. Cells whose extremes are zeros take the exact path (a
      // tie of -0 and +0 keeps the first one scanned).
      bool fast = false;
      if (group_clean) {
        const size_t n = count(c1 - c0);
        sc.col_mx.resize(n);
        sc.col_mn.resize(n);
        sc.col_sum.resize(n);
        sc.col_check.resize(n);
        // Sums only feed the means of cells with counts.
        const auto pool = which_.cell_counts ? pool_columns<true> : pool_columns<false>;
        fast = pool(src[k] + (i - t.i0) * t.ld + (c0 - t.j0), i_end - i, c1 - c0, t.ld,
                    sc.col_mx.data(), sc.col_mn.data(), sc.col_sum.data(), sc.col_check.data());
      }
      int64_t split_at = row_split_at;
      for (int64_t c = c0; c < c1;) {
        const int64_t pc = col_pix_[count(c - w.col_begin)];
        const int64_t end = std::min(c1, out_.col_edges[count(pc + 1)]);
        Cell cell = kEmptyCell;
        float mx = -kInf, mn = kInf;
        double sum = 0;
        for (int64_t e = c - c0; fast && e < end - c0; ++e) {
          mx = std::max(mx, sc.col_mx[count(e)]);
          mn = std::min(mn, sc.col_mn[count(e)]);
          if (which_.cell_counts) sum += sc.col_sum[count(e)];
        }
        if (fast && mx != 0 && mn != 0) {
          cell.max = mx;
          cell.min = mn;
          cell.sum += sum;
          cell.finite = static_cast<int32_t>((i_end - i) * (end - c));
        } else {
          for (int64_t r = i - t.i0; r < i_end - t.i0; ++r) {
            const uint8_t* cls_r = any_mask_ ? sc.cls.data() + r * t.cols + (c - t.j0) : nullptr;
            add_segment(cell, src[k] + r * t.ld + (c - t.j0), cls_r, end - c, k == 0);
          }
        }
        if (is_split(pr, pc)) {
          partial_[k][slot][count(split_at++)] = cell;
        } else {
          const size_t at =
              staged_
                  ? count(stage_at_[slot] + (pr - tc.pr0) * (tc.pc1 - tc.pc0 + 1) + (pc - tc.pc0))
                  : count(pr * out_.cols + pc);
          store(staged_ ? stage_[k] : *mats[k], at, cell, sc.totals[k]);
        }
        c = end;
      }
    }
    row_split_at += split_in_row(tc, pr);
    i = i_end;
  }
  ++arrived_;
}

void PooledCells::unstage(int64_t qt) {
  PooledMatrix* mats[] = {&out_.s, &out_.p, &out_.dp, &out_.ds};
  for (int64_t jt = jt0_; jt < jt0_ + n_jt_; ++jt) {
    const TileCells tc = tile_cells(qt, jt);
    const int64_t width = tc.pc1 - tc.pc0 + 1;
    // The tile's final cells of a row: its columns but a split first or last one.
    const int64_t a = tc.pc0 + col_split_[count(tc.pc0)];
    const int64_t b = tc.pc1 - col_split_[count(tc.pc1)];
    if (a > b) continue;
    const size_t n = count(b - a + 1);
    for (int64_t pr = tc.pr0; pr <= tc.pr1; ++pr) {
      if (row_split_[count(pr)]) continue;
      const size_t from = count(stage_at_[count((qt - qt0_) * n_jt_ + (jt - jt0_))] +
                                (pr - tc.pr0) * width + (a - tc.pc0));
      const size_t to = count(pr * out_.cols + a);
      for (int k = 0; k < 4; ++k) {
        PooledMatrix& src = stage_[k];
        PooledMatrix& dst = *mats[k];
        const auto move = [&](const auto& s_vec, auto& d_vec) {
          if (!s_vec.empty()) std::copy_n(s_vec.begin() + from, n, d_vec.begin() + to);
        };
        move(src.max, dst.max);
        move(src.min, dst.min);
        move(src.mean, dst.mean);
        move(src.cls, dst.cls);
        move(src.finite, dst.finite);
        move(src.nan, dst.nan);
        move(src.pos_inf, dst.pos_inf);
        move(src.neg_inf, dst.neg_inf);
        move(src.masked, dst.masked);
      }
    }
  }
}

PooledHeadMatrices PooledCells::finish() {
  // Split cells: partials merged in (q tile, kv tile) order; max / min are order independent
  // except for the sign of a zero extreme, which the first partial holding it decides.
  if (arrived_ != n_qt_ * n_jt_) {
    throw std::logic_error("PooledCells: " + std::to_string(n_qt_ * n_jt_ - arrived_) +
                           " tiles overlapping the window never arrived");
  }
  if (staged_) {
    parallel_for(n_qt_, static_cast<int>(scratch_.size()),
                 [&](int64_t item, int) { unstage(qt0_ + item); });
  }
  const bool selected[] = {which_.s, which_.p, which_.dp, which_.ds};
  PooledMatrix* mats[] = {&out_.s, &out_.p, &out_.dp, &out_.ds};
  CellCounts totals[4];
  std::vector<Cell> merged;
  for (int k = 0; k < 4; ++k) {
    if (!selected[k] || split_row_base_.back() == 0) continue;
    merged.assign(count(split_row_base_.back()), kEmptyCell);
    for (int64_t qt = qt0_; qt < qt0_ + n_qt_; ++qt) {
      for (int64_t jt = jt0_; jt < jt0_ + n_jt_; ++jt) {
        const std::vector<Cell>& part = partial_[k][count((qt - qt0_) * n_jt_ + (jt - jt0_))];
        const TileCells tc = tile_cells(qt, jt);
        size_t next = 0;
        for (int64_t pr = tc.pr0; pr <= tc.pr1; ++pr) {
          for (int64_t pc = tc.pc0; pc <= tc.pc1; ++pc) {
            if (!is_split(pr, pc)) continue;
            const Cell& p = part[next++];
            Cell& m = merged[count(split_id(pr, pc))];
            m.max = std::max(m.max, p.max);
            m.min = std::min(m.min, p.min);
            m.sum += p.sum;
            m.finite += p.finite;
            m.nan += p.nan;
            m.pos_inf += p.pos_inf;
            m.neg_inf += p.neg_inf;
            m.masked += p.masked;
          }
        }
      }
    }
    for (int64_t pr = 0; pr < out_.rows; ++pr) {
      for (int64_t pc = 0; pc < out_.cols; ++pc) {
        if (is_split(pr, pc)) {
          store(*mats[k], count(pr * out_.cols + pc), merged[count(split_id(pr, pc))], totals[k]);
        }
      }
    }
    partial_[k].clear();
  }
  for (int k = 0; k < 4; ++k) {
    CellCounts& t = mats[k]->totals;
    t = totals[k];
    for (const Scratch& sc : scratch_) t += sc.totals[k];
  }
  return std::move(out_);
}

}  // namespace attnscope::cpu
