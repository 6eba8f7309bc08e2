// The compare view's grids headless: the difference of two grids cell by cell (values, which
// run alone broke, agreement on the same non-finite class, the largest difference and where),
// refusal of grids over other cells, and a head's recorded outputs as grids (GQA dK / dV and
// score views refused).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/view/grid_compare.h"
#include "core/view/head_grids.h"
#include "tests/view/smooth_case.h"

namespace attnscope::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(GridCompare, difference_marks_where_only_one_run_broke) {
  // 2 x 3: finite in both, NaN only in b, +inf only in a, NaN in both, inf vs NaN, finite.
  const MatrixGrid a = dense_grid("S", {1.0f, 2.0f, kInf, kNaN, kInf, -4.0f}, 2, 3);
  const MatrixGrid b = dense_grid("S", {0.5f, kNaN, 3.0f, kNaN, kNaN, -4.0f}, 2, 3);
  const Result<GridDifference> d = difference_grid(a, b, "S A - B");
  ASSERT_TRUE(d.ok()) << d.error().message;
  const MatrixGrid& g = d->grid;
  const std::vector<CellClass> want = {CellClass::finite, CellClass::nan, CellClass::pos_inf,
                                       CellClass::finite, CellClass::nan, CellClass::finite};
  EXPECT_EQ(g.cls, want);
  EXPECT_EQ(g.raw[0], 0.5f);
  EXPECT_EQ(g.raw[3], 0.0f);  // NaN in both: they agree
  EXPECT_EQ(g.raw[5], 0.0f);
  EXPECT_TRUE(std::isinf(g.raw[2]) && g.raw[2] > 0);
  EXPECT_EQ(d->only_a, 1);
  EXPECT_EQ(d->only_b, 1);
  EXPECT_EQ(d->differ, 1);
  EXPECT_EQ(d->max_abs, 0.5);
  EXPECT_EQ(d->max_row, 0);
  EXPECT_EQ(d->max_col, 0);
  EXPECT_EQ(g.counts.nan, 2);
  EXPECT_EQ(g.counts.pos_inf, 1);
  EXPECT_EQ(g.counts.finite, 3);
}

TEST(GridCompare, grids_over_other_cells_are_refused) {
  const MatrixGrid a = dense_grid("O", {1.0f, 2.0f, 3.0f, 4.0f}, 2, 2);
  const MatrixGrid b = dense_grid("O", {1.0f, 2.0f, 3.0f, 4.0f}, 1, 4);
  const Result<GridDifference> d = difference_grid(a, b, "O A - B");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, ErrorCode::invalid_argument);
}

TEST(GridCompare, recorded_outputs_of_a_head_and_what_cannot_be_compared) {
  CaseData c = smoothCase(2);
  std::vector<float> o(2 * 40 * 16);
  for (size_t i = 0; i < o.size(); ++i) o[i] = static_cast<float>(i);
  c.tensors["o"] = HostTensor::from_float(DType::f32, {1, 2, 40, 16}, o);
  const Result<MatrixGrid> head1 = recorded_grid(c, HeadView::o, 0, 1);
  ASSERT_TRUE(head1.ok()) << head1.error().message;
  EXPECT_EQ(head1->rows, 40);
  EXPECT_EQ(head1->cols, 16);
  EXPECT_EQ(head1->raw.front(), static_cast<float>(40 * 16));  // head 1's first element
  EXPECT_EQ(recorded_grid(c, HeadView::dq, 0, 0).error().code, ErrorCode::unsupported);  // absent
  EXPECT_EQ(recorded_grid(c, HeadView::s, 0, 0).error().code, ErrorCode::unsupported);
  CaseData gqa = smoothCase(2, 1);
  gqa.tensors["dk"] =
      HostTensor::from_float(DType::f32, {1, 1, 56, 16}, std::vector<float>(56 * 16, 1.0f));
  const Result<MatrixGrid> dk = recorded_grid(gqa, HeadView::dk, 0, 1);
  ASSERT_FALSE(dk.ok());
  EXPECT_NE(dk.error().message.find("GQA"), std::string::npos) << dk.error().message;
}

}  // namespace
}  // namespace attnscope::test
