// Plain C++ (no Qt) data a heatmap draws: a grid of cells over a window of a matrix, each cell
// one element (full resolution) or a pooled block, with its overlay class and a readout of the
// cell under the cursor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attn_names.h"  // cell_class_name
#include "kernels/attn_types.h"  // CellClass, CellCounts, MatrixWindow

namespace attnscope {

// What the inspector shows for the cell under the cursor.
struct CellReadout {
  std::string matrix;
  int64_t row = -1, col = -1;  // the element under the cursor
  MatrixWindow block;          // the cell's block (one element at full resolution), resolved
  bool pooled = false;
  CellClass cls = CellClass::finite;
  float value = 0;         // full resolution: the kernel's value; pooled: the finite extreme
  float min = 0, max = 0;  // pooled: finite range of the block

  bool valid() const { return row >= 0 && col >= 0; }
};

// A grid of cells covering query rows [row_edges[0], row_edges[rows]) and columns
// [col_edges[0], col_edges[cols]) (absolute indices). Full resolution: one element per cell and
// `raw` holds the kernel's values (non-finite included). Pooled: a cell covers a block; value
// is the block's finite extreme (largest |x|), cell_min / cell_max its finite range.
struct MatrixGrid {
  std::string name;  // "S", "P", "dP", "dS", "O", "dQ"
  int64_t rows = 0, cols = 0;
  int64_t total_rows = 0, total_cols = 0;     // full matrix size (Sq x Sk, Sq x Dv, ...)
  std::vector<int64_t> row_edges, col_edges;  // [rows + 1], [cols + 1]
  bool pooled = false;
  std::vector<float> value;  // [rows x cols] NaN where cls != finite
  std::vector<CellClass> cls;
  std::vector<float> raw;                 // full resolution only
  std::vector<float> cell_min, cell_max;  // pooled only
  CellCounts counts;                      // elements by class

  bool empty() const { return rows == 0 || cols == 0; }
  // True when the grid shows every element of the matrix at full resolution.
  bool complete() const;
  // Cell holding element (row, col), or -1 outside the grid.
  int64_t cell_of(int64_t row, int64_t col) const;
  // Readout of element (row, col); invalid (row = -1) outside the grid.
  CellReadout readout(int64_t row, int64_t col) const;
};

}  // namespace attnscope
