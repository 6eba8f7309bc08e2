// Recorded-output grids and the difference of two grids (see grid_compare.h).
#include "core/view/grid_compare.h"

#include <cmath>
#include <limits>

#include "core/view/head_grids.h"

namespace attnscope {
namespace {

// The value an element of a non-finite class holds (masked: NaN, it has none).
float value_of(CellClass c) {
  switch (c) {
    case CellClass::pos_inf:
      return std::numeric_limits<float>::infinity();
    case CellClass::neg_inf:
      return -std::numeric_limits<float>::infinity();
    default:
      return std::numeric_limits<float>::quiet_NaN();
  }
}

bool nonfinite(CellClass c) {
  return c == CellClass::nan || c == CellClass::pos_inf || c == CellClass::neg_inf;
}

}  // namespace

Result<MatrixGrid> recorded_grid(const CaseData& data, HeadView view, int64_t b, int64_t h) {
  const char* name = nullptr;
  switch (view) {
    case HeadView::o:
      name = "o";
      break;
    case HeadView::dq:
      name = "dq";
      break;
    case HeadView::dk:
      name = "dk";
      break;
    case HeadView::dv:
      name = "dv";
      break;
    default:
      return make_error(ErrorCode::unsupported,
                        std::string("nothing is recorded for ") + head_view_name(view),
                        "compare O, dQ, dK or dV with the recording");
  }
  const HostTensor* t = data.find(name);
  if (t == nullptr) {
    return make_error(ErrorCode::unsupported, data.info.path + " records no '" + name + "'",
                      "record the outputs and gradients with attnscope_record, or compare two "
                      "runs instead");
  }
  const CaseDims& d = data.info.dims;
  const bool kv = view == HeadView::dk || view == HeadView::dv;
  if (kv && d.heads != d.kv_heads) {
    return make_error(ErrorCode::unsupported,
                      std::string("the recorded ") + name + " is the kv head's gradient (GQA: " +
                          std::to_string(d.heads / d.kv_heads) +
                          " query heads share it); the view shows one query head's share",
                      "compare O or dQ with the recording");
  }
  if (d.batch_summed(name)) {
    return make_error(ErrorCode::unsupported,
                      std::string("the recorded ") + name + " is the sum over the batch (" +
                          (view == HeadView::dq ? "q" : "k and v") + " broadcast to B = " +
                          std::to_string(d.batch) + "); the view shows one batch's",
                      "compare O with the recording; scan compares the summed gradient");
  }
  const auto [rows, cols] = head_view_shape(view, d);
  const int64_t heads = kv ? d.kv_heads : d.heads;
  const int64_t head = kv ? h / (d.heads / d.kv_heads) : h;
  const std::vector<float> all = t->to_float();
  const size_t first = static_cast<size_t>((b * heads + head) * rows * cols);
  std::vector<float> raw(all.begin() + static_cast<std::ptrdiff_t>(first),
                         all.begin() + static_cast<std::ptrdiff_t>(first + rows * cols));
  return dense_grid(head_view_name(view), std::move(raw), rows, cols);
}

Result<GridDifference> difference_grid(const MatrixGrid& a, const MatrixGrid& b,
                                       const std::string& name) {
  if (a.row_edges != b.row_edges || a.col_edges != b.col_edges || a.pooled != b.pooled ||
      a.cls.size() != b.cls.size()) {
    return make_error(ErrorCode::invalid_argument,
                      "the two grids of " + name + " cover different cells",
                      "compute both runs at the same window and size");
  }
  GridDifference out;
  MatrixGrid& g = out.grid;
  g.name = name;
  g.rows = a.rows;
  g.cols = a.cols;
  g.total_rows = a.total_rows;
  g.total_cols = a.total_cols;
  g.row_edges = a.row_edges;
  g.col_edges = a.col_edges;
  g.pooled = a.pooled;
  g.value.assign(a.value.size(), std::numeric_limits<float>::quiet_NaN());
  g.cls.assign(a.cls.size(), CellClass::finite);
  if (!g.pooled) g.raw.assign(a.raw.size(), 0.0f);
  for (size_t i = 0; i < a.cls.size(); ++i) {
    const CellClass ca = a.cls[i], cb = b.cls[i];
    CellClass c = CellClass::finite;
    float d = 0;
    if (ca == CellClass::finite && cb == CellClass::finite) {
      d = a.value[i] - b.value[i];
      if (out.max_row < 0 || std::fabs(d) > out.max_abs) {
        out.max_abs = std::fabs(d);
        out.max_row = a.row_edges[i / static_cast<size_t>(a.cols)];
        out.max_col = a.col_edges[i % static_cast<size_t>(a.cols)];
      }
      out.differ += d != 0;
    } else if (ca == CellClass::masked && cb == CellClass::masked) {
      c = CellClass::masked;
    } else if (nonfinite(ca) && nonfinite(cb)) {
      c = ca == cb ? CellClass::finite : CellClass::nan;
    } else if (nonfinite(ca)) {
      c = ca;
      ++out.only_a;
    } else if (nonfinite(cb)) {
      c = cb;
      ++out.only_b;
    } else {
      c = CellClass::masked;  // masked in one, finite in the other: nothing to compare
    }
    g.cls[i] = c;
    if (c == CellClass::finite) g.value[i] = d;
    if (!g.pooled) g.raw[i] = c == CellClass::finite ? d : value_of(c);
    g.counts.add(c);
  }
  return out;
}

}  // namespace attnscope
