// Comparisons of compute_head results shared by the view tests and the GUI tests: grids equal
// bit for bit (NaN payloads included) and whether a stage ran.
#pragma once

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/view/head_compute.h"

namespace attnscope::test {

// Same length and bytes (two empty vectors are the same: memcmp is not called on their null data).
inline bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Non-empty and equal in shape, classes, values, cell ranges and edges.
inline bool sameGrid(const MatrixGrid& a, const MatrixGrid& b) {
  return !a.empty() && a.rows == b.rows && a.cols == b.cols && a.cls == b.cls &&
         sameBits(a.value, b.value) && sameBits(a.cell_min, b.cell_min) &&
         sameBits(a.cell_max, b.cell_max) && a.row_edges == b.row_edges &&
         a.col_edges == b.col_edges;
}

// Whether the result's stage `phase` ("cpu fwd+bwd", "score grids", ...) ran for it.
inline bool ran(const HeadResult& r, const char* phase) {
  return std::any_of(r.phases.begin(), r.phases.end(),
                     [&](const HeadPhase& p) { return std::strcmp(p.name, phase) == 0; });
}

}  // namespace attnscope::test
