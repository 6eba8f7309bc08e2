// Pooled S, P, dP, dS of one (batch, head) window (see head_matrices.h). Q tiles are
// recomputed in waves, each into its own partial cells; the partials are merged in q tile
// order, so the result does not depend on the number of threads.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/head_matrices.h"
#include "kernels/cpu/head_tiles.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_scan.h"

namespace attnscope {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

// Accumulated statistics of one cell.
struct Cell {
  float max = -kInf, min = kInf;
  double sum = 0;
  int32_t finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, masked = 0;
};

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

// First pass of pooling a row group: per column c in [0, n_cols), the max, min and sum of
// x[r][c] over rows r in [0, n_rows) (row stride ld), vectorised across columns. Returns false
// when an entry is NaN or inf (the outputs are then meaningless).
bool pool_columns(const float* x, int64_t n_rows, int64_t n_cols, int64_t ld, float* mx, float* mn,
                  double* sum, float* check) {
  for (int64_t c = 0; c < n_cols; ++c) {
    mx[c] = mn[c] = x[c];
    sum[c] = x[c];
    check[c] = x[c] * 0.0f;  // NaN once an entry is NaN or inf
  }
  for (int64_t r = 1; r < n_rows; ++r) {
    const float* x_r = x + r * ld;
    for (int64_t c = 0; c < n_cols; ++c) {
      const float v = x_r[c];
      mx[c] = v > mx[c] ? v : mx[c];
      mn[c] = v < mn[c] ? v : mn[c];
      sum[c] += v;
      check[c] += v * 0.0f;
    }
  }
  float all = 0;
  for (int64_t c = 0; c < n_cols; ++c) all += check[c];
  return all == 0.0f;
}

// Cells of one q tile: pixel rows [pr0, pr0 + n_rows) x all pixel columns, per matrix.
struct Partial {
  int64_t pr0 = 0, n_rows = 0;
  std::vector<Cell> cells[4];
};

// edges[e] = begin + floor(e * size / n) for e in [0, n]; pixel[i] = the cell holding begin + i.
void make_edges(int64_t begin, int64_t size, int64_t n, std::vector<int64_t>& edges,
                std::vector<int64_t>& pixel) {
  edges.resize(count(n + 1));
  for (int64_t e = 0; e <= n; ++e) edges[count(e)] = begin + e * size / n;
  pixel.resize(count(size));
  for (int64_t e = 0; e < n; ++e) {
    for (int64_t i = edges[count(e)]; i < edges[count(e + 1)]; ++i) pixel[count(i - begin)] = e;
  }
}

}  // namespace

PooledHeadMatrices cpu_pooled_matrices(const AttnParams& params, const CpuAttnOptions& options,
                                       const CpuAttnInputs& inputs, int64_t b, int64_t h,
                                       int64_t out_rows, int64_t out_cols, MatrixWindow window,
                                       MatrixSelection which, const ForwardRows* rows) {
  using cpu::kTileRows;
  PooledHeadMatrices out;
  out.window = cpu::resolve_window(params, window);
  const MatrixWindow& w = out.window;
  const cpu::HeadTiles tiles(params, options.mode, inputs, b, h, cpu::last_stage(which), rows);
  const int64_t R = w.row_end - w.row_begin, C = w.col_end - w.col_begin;
  out.rows = std::clamp<int64_t>(out_rows, 1, R);
  out.cols = std::clamp<int64_t>(out_cols, 1, C);
  std::vector<int64_t> row_pix, col_pix;
  make_edges(w.row_begin, R, out.rows, out.row_edges, row_pix);
  make_edges(w.col_begin, C, out.cols, out.col_edges, col_pix);

  PooledMatrix* mats[] = {&out.s, &out.p, &out.dp, &out.ds};
  const bool selected[] = {which.s, which.p, which.dp, which.ds};
  const size_t n_cells = count(out.rows * out.cols);
  for (int k = 0; k < 4; ++k) {
    if (!selected[k]) continue;
    PooledMatrix& m = *mats[k];
    m.max.assign(n_cells, -kInf);
    m.min.assign(n_cells, kInf);
    m.mean.assign(n_cells, 0.0f);
    for (std::vector<int32_t>* c : {&m.finite, &m.nan, &m.pos_inf, &m.neg_inf, &m.masked}) {
      c->assign(n_cells, 0);
    }
  }

  const bool any_mask = params.causal || cpu::needs_mask_classes(params);
  const int threads = cpu::resolve_threads(options.threads);
  std::vector<cpu::HeadTiles::Scratch> scratch(count(threads), cpu::HeadTiles::Scratch(tiles));
  const auto pool_q_tile = [&](int64_t qt, Partial& part, cpu::HeadTiles::Scratch& sc) {
    const int64_t i_first = std::max(qt * kTileRows, w.row_begin);
    const int64_t i_last = std::min((qt + 1) * kTileRows, w.row_end) - 1;
    part.pr0 = row_pix[count(i_first - w.row_begin)];
    part.n_rows = row_pix[count(i_last - w.row_begin)] - part.pr0 + 1;
    for (int k = 0; k < 4; ++k) {
      if (selected[k]) part.cells[k].assign(count(part.n_rows * out.cols), Cell{});
    }
    std::vector<uint8_t> cls;
    std::vector<uint8_t> clean;                    // per tile row: every entry in [c0, c1) visible
    std::vector<float> col_mx, col_mn, col_check;  // pool_columns of one row group
    std::vector<double> col_sum;
    tiles.q_tile(qt, w.col_begin, w.col_end, sc, [&](const cpu::TileBlock& blk) {
      const cpu::ScoreTile& t = blk.t;
      const int64_t c0 = std::max(t.j0, w.col_begin), c1 = std::min(t.j0 + t.cols, w.col_end);
      clean.assign(count(t.rows), 1);
      if (any_mask) {
        cls.resize(count(t.rows * t.cols));
        cpu::mask_classes(tiles.operands().x, t, cls.data());
        for (int64_t r = 0; r < t.rows; ++r) {
          const uint8_t* c_r = cls.data() + r * t.cols;
          clean[count(r)] = std::all_of(c_r + (c0 - t.j0), c_r + (c1 - t.j0),
                                        [](uint8_t c) { return c == kEntryVisible; });
        }
      }
      const float* src[] = {blk.s, blk.p, blk.dp, blk.ds};
      // Rows [i, i_end) of the tile share pixel row pr; each group x pixel column is one block.
      for (int64_t i = i_first; i <= i_last;) {
        const int64_t pr = row_pix[count(i - w.row_begin)];
        const int64_t i_end = std::min(i_last + 1, out.row_edges[count(pr + 1)]);
        const int64_t cell_row = (pr - part.pr0) * out.cols;
        const bool group_clean =
            std::all_of(clean.begin() + (i - t.i0), clean.begin() + (i_end - t.i0),
                        [](uint8_t c) { return c != 0; });
        for (int k = 0; k < 4; ++k) {
          if (!selected[k]) continue;
          // Fast path: an all-visible, all-finite group is reduced over its rows per column
          // first, then per cell over its columns. Cells whose extremes are zeros take the
          // exact path (a tie of -0 and +0 keeps the first one scanned).
          bool fast = false;
          if (group_clean) {
            const size_t n = count(c1 - c0);
            col_mx.resize(n);
            col_mn.resize(n);
            col_sum.resize(n);
            col_check.resize(n);
            fast = pool_columns(src[k] + (i - t.i0) * t.ld + (c0 - t.j0), i_end - i, c1 - c0, t.ld,
                                col_mx.data(), col_mn.data(), col_sum.data(), col_check.data());
          }
          for (int64_t c = c0; c < c1;) {
            const int64_t pc = col_pix[count(c - w.col_begin)];
            const int64_t end = std::min(c1, out.col_edges[count(pc + 1)]);
            Cell& cell = part.cells[k][count(cell_row + pc)];
            float mx = -kInf, mn = kInf;
            double sum = 0;
            for (int64_t e = c - c0; fast && e < end - c0; ++e) {
              mx = std::max(mx, col_mx[count(e)]);
              mn = std::min(mn, col_mn[count(e)]);
              sum += col_sum[count(e)];
            }
            if (fast && mx != 0 && mn != 0) {
              cell.max = std::max(cell.max, mx);
              cell.min = std::min(cell.min, mn);
              cell.sum += sum;
              cell.finite += static_cast<int32_t>((i_end - i) * (end - c));
            } else {
              for (int64_t r = i - t.i0; r < i_end - t.i0; ++r) {
                const uint8_t* cls_r = any_mask ? cls.data() + r * t.cols : nullptr;
                add_segment(cell, src[k] + r * t.ld + (c - t.j0),
                            cls_r != nullptr ? cls_r + (c - t.j0) : nullptr, end - c, k == 0);
              }
            }
            c = end;
          }
        }
        i = i_end;
      }
    });
  };

  // Parts arrive in q tile order, so pixel rows are visited in order and only the last one
  // can continue into the next part: fp64 sums are kept for that open row alone.
  std::vector<double> open_sum[4];
  int64_t open_row = -1;
  const auto close_row = [&] {
    if (open_row < 0) return;
    for (int k = 0; k < 4; ++k) {
      if (!selected[k]) continue;
      PooledMatrix& m = *mats[k];
      for (int64_t c = 0; c < out.cols; ++c) {
        const size_t at = count(open_row * out.cols + c);
        const bool none = m.finite[at] == 0;
        m.mean[at] = none ? NAN : static_cast<float>(open_sum[k][count(c)] / m.finite[at]);
        if (none) m.max[at] = m.min[at] = NAN;
      }
    }
  };

  const int64_t qt0 = w.row_begin / kTileRows, qt1 = (w.row_end - 1) / kTileRows;
  const int64_t wave = 2 * int64_t{threads};
  std::vector<Partial> parts(count(wave));
  for (int64_t first = qt0; first <= qt1; first += wave) {
    const int64_t n = std::min(wave, qt1 - first + 1);
    cpu::parallel_for(n, threads, [&](int64_t item, int worker) {
      pool_q_tile(first + item, parts[count(item)], scratch[count(worker)]);
    });
    for (int64_t item = 0; item < n; ++item) {
      const Partial& part = parts[count(item)];
      for (int64_t lr = 0; lr < part.n_rows; ++lr) {
        const int64_t pr = part.pr0 + lr;
        if (pr != open_row) {
          close_row();
          open_row = pr;
          for (int k = 0; k < 4; ++k) {
            if (selected[k]) open_sum[k].assign(count(out.cols), 0.0);
          }
        }
        for (int k = 0; k < 4; ++k) {
          if (!selected[k]) continue;
          PooledMatrix& m = *mats[k];
          for (int64_t c = 0; c < out.cols; ++c) {
            const Cell& cell = part.cells[k][count(lr * out.cols + c)];
            const size_t at = count(pr * out.cols + c);
            m.max[at] = std::max(m.max[at], cell.max);
            m.min[at] = std::min(m.min[at], cell.min);
            open_sum[k][count(c)] += cell.sum;
            m.finite[at] += cell.finite;
            m.nan[at] += cell.nan;
            m.pos_inf[at] += cell.pos_inf;
            m.neg_inf[at] += cell.neg_inf;
            m.masked[at] += cell.masked;
          }
        }
      }
    }
  }
  close_row();
  return out;
}

}  // namespace attnscope
