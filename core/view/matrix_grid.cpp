// Cell lookup and readout of a MatrixGrid.
#include "core/view/matrix_grid.h"

#include <algorithm>

namespace attnscope {

bool MatrixGrid::complete() const {
  return !pooled && !empty() && row_edges.front() == 0 && col_edges.front() == 0 &&
         row_edges.back() == total_rows && col_edges.back() == total_cols;
}

int64_t MatrixGrid::cell_of(int64_t row, int64_t col) const {
  if (empty() || row < row_edges.front() || row >= row_edges.back() || col < col_edges.front() ||
      col >= col_edges.back()) {
    return -1;
  }
  const auto r = std::upper_bound(row_edges.begin(), row_edges.end(), row) - row_edges.begin() - 1;
  const auto c = std::upper_bound(col_edges.begin(), col_edges.end(), col) - col_edges.begin() - 1;
  return r * cols + c;
}

CellReadout MatrixGrid::readout(int64_t row, int64_t col) const {
  CellReadout out;
  out.matrix = name;
  const int64_t cell = cell_of(row, col);
  if (cell < 0) return out;
  const size_t e = static_cast<size_t>(cell);
  const int64_t r = cell / cols, c = cell % cols;
  out.row = row;
  out.col = col;
  out.block = {row_edges[static_cast<size_t>(r)], row_edges[static_cast<size_t>(r + 1)],
               col_edges[static_cast<size_t>(c)], col_edges[static_cast<size_t>(c + 1)]};
  out.pooled = pooled;
  out.cls = cls[e];
  if (pooled) {
    out.value = value[e];
    out.min = cell_min[e];
    out.max = cell_max[e];
  } else {
    out.value = raw[e];
    out.min = out.max = raw[e];
  }
  return out;
}

}  // namespace attnscope
