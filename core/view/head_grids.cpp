// MatrixGrid builders for the heatmaps (see head_grids.h).
#include "core/view/head_grids.h"

#include <cmath>

#include "kernels/attn_types.h"

namespace attnscope {
namespace {

CellClass classify(float x, bool masked) {
  if (std::isnan(x)) return CellClass::nan;
  if (masked) return CellClass::masked;
  if (std::isinf(x)) return x > 0 ? CellClass::pos_inf : CellClass::neg_inf;
  return CellClass::finite;
}

std::vector<int64_t> unit_edges(int64_t begin, int64_t n) {
  std::vector<int64_t> edges(static_cast<size_t>(n + 1));
  for (int64_t e = 0; e <= n; ++e) edges[static_cast<size_t>(e)] = begin + e;
  return edges;
}

}  // namespace

MatrixGrid full_grid(const char* name, std::vector<float> raw, const std::vector<uint8_t>& masked,
                     int64_t r0, int64_t rows, int64_t c0, int64_t cols, int64_t total_rows,
                     int64_t total_cols) {
  MatrixGrid g;
  g.name = name;
  g.rows = rows;
  g.cols = cols;
  g.total_rows = total_rows;
  g.total_cols = total_cols;
  g.row_edges = unit_edges(r0, rows);
  g.col_edges = unit_edges(c0, cols);
  const size_t n = raw.size();
  g.value.resize(n);
  g.cls.resize(n);
  for (size_t e = 0; e < n; ++e) {
    const CellClass cls = classify(raw[e], !masked.empty() && masked[e] != kEntryVisible);
    g.cls[e] = cls;
    g.value[e] = cls == CellClass::finite ? raw[e] : std::nanf("");
    g.counts.add(cls);
  }
  g.raw = std::move(raw);
  return g;
}

MatrixGrid dense_grid(const char* name, std::vector<float> raw, int64_t rows, int64_t cols) {
  return full_grid(name, std::move(raw), {}, 0, rows, 0, cols, rows, cols);
}

MatrixGrid pooled_grid(const char* name, const PooledHeadMatrices& pm, PooledMatrix m,
                       int64_t total_rows, int64_t total_cols) {
  MatrixGrid g;
  g.name = name;
  g.pooled = true;
  g.rows = pm.rows;
  g.cols = pm.cols;
  g.total_rows = total_rows;
  g.total_cols = total_cols;
  g.row_edges = pm.row_edges;
  g.col_edges = pm.col_edges;
  const size_t n = m.max.size();
  if (!m.cls.empty()) {
    g.cls = std::move(m.cls);
    g.counts = m.totals;
  } else {
    g.cls.resize(n);
    for (size_t e = 0; e < n; ++e) {
      g.cls[e] = cell_class(m.nan[e], m.pos_inf[e], m.neg_inf[e], m.finite[e]);
      g.counts += {m.finite[e], m.nan[e], m.pos_inf[e], m.neg_inf[e], m.masked[e]};
    }
  }
  g.value.resize(n);
  for (size_t e = 0; e < n; ++e) {
    g.value[e] = g.cls[e] != CellClass::finite                ? std::nanf("")
                 : std::fabs(m.max[e]) >= std::fabs(m.min[e]) ? m.max[e]
                                                              : m.min[e];
  }
  g.cell_min = std::move(m.min);
  g.cell_max = std::move(m.max);
  return g;
}

std::vector<float> row_norms(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> norms(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double e = x[static_cast<size_t>(i * cols + c)];
      sum += e * e;
    }
    norms[static_cast<size_t>(i)] = static_cast<float>(std::sqrt(sum));
  }
  return norms;
}

}  // namespace attnscope
