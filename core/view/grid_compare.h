// What the compare view (DESIGN §5) puts next to a head's grid (plain C++, no Qt): the grid of a
// recorded output of the dump (o, dq, dk, dv of one head) and the difference of two grids of
// the same view, window and cells, with a summary of where they disagree.
#pragma once

#include <cstdint>
#include <string>

#include "core/case_model.h"
#include "core/result.h"
#include "core/view/head_view.h"
#include "core/view/matrix_grid.h"

namespace attnscope {

// The recorded o / dq / dk / dv of (batch b, head h) as a full-resolution grid of `view`'s shape.
// Fails (unsupported) for score views and errors views (nothing is recorded), a tensor the dump
// does not hold, and dK / dV under GQA (the recording holds the kv head's gradient, the views a
// query head's share of it).
Result<MatrixGrid> recorded_grid(const CaseData& data, HeadView view, int64_t b, int64_t h);

// Where two grids of the same cells disagree.
struct GridDifference {
  MatrixGrid grid;                     // a - b per cell (see difference_grid)
  double max_abs = 0;                  // largest |a - b| over cells finite in both
  int64_t max_row = -1, max_col = -1;  // the first element of that cell (-1: no such cell)
  int64_t differ = 0;                  // cells finite in both with a != b
  int64_t only_a = 0;                  // cells non-finite (NaN / inf) in a but finite in b
  int64_t only_b = 0;                  // and the other way round
};

// The difference of two grids with the same edges (the same view, window and cell size).
// A cell finite in both holds a - b; non-finite in exactly one it takes that one's class (so the
// overlay shows where only one run broke); the same non-finite class in both is 0 (they agree);
// NaN against an infinity is NaN; masked in both stays masked. Pooled cells hold their block's
// largest |value|, so their difference is that of the blocks' extremes. Fails (invalid_argument)
// when the edges differ.
Result<GridDifference> difference_grid(const MatrixGrid& a, const MatrixGrid& b,
                                       const std::string& name);

}  // namespace attnscope
