// Builders of the MatrixGrids the heatmaps draw (plain C++, no Qt): a full-resolution grid from
// a kernel buffer (every element classified finite / NaN / +inf / -inf / masked) and a grid
// from the pooled head matrices (a block with one NaN stays NaN).
#pragma once

#include <cstdint>
#include <vector>

#include "core/view/matrix_grid.h"
#include "kernels/cpu/head_matrices.h"

namespace attnscope {

// A full-resolution grid of `raw` values over rows [r0, r0 + rows) x cols [c0, c0 + cols) of a
// total_rows x total_cols matrix. masked: MaskedEntry per element, or empty (nothing masked).
MatrixGrid full_grid(const char* name, std::vector<float> raw, const std::vector<uint8_t>& masked,
                     int64_t r0, int64_t rows, int64_t c0, int64_t cols, int64_t total_rows,
                     int64_t total_cols);

// A whole rows x cols matrix at full resolution, nothing masked.
MatrixGrid dense_grid(const char* name, std::vector<float> raw, int64_t rows, int64_t cols);

// One pooled matrix m of `pm` (with or without cell counts; its max and min move into the
// grid) as a grid; a cell's class is its worst element's (NaN, +inf, -inf, all masked) and its
// value the finite extreme with the larger magnitude.
MatrixGrid pooled_grid(const char* name, const PooledHeadMatrices& pm, PooledMatrix m,
                       int64_t total_rows, int64_t total_cols);

// ||x_i||_2 of each row of a row-major rows x cols buffer (NaN / inf propagate).
std::vector<float> row_norms(const std::vector<float>& x, int64_t rows, int64_t cols);

}  // namespace attnscope
