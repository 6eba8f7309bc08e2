// The head views' one vocabulary: names round-trip, a finding's tensor picks the view that shows
// it, shapes and axis labels follow the tensor's rows (queries or keys) and columns.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/case_model.h"
#include "core/view/head_view.h"

namespace attnscope::test {
namespace {

TEST(HeadView, names_are_distinct_and_round_trip) {
  std::set<std::string> names;
  for (HeadView v : kHeadViews) {
    const std::string name = head_view_name(v);
    EXPECT_TRUE(names.insert(name).second) << name;
    ASSERT_TRUE(head_view_named(name).has_value()) << name;
    EXPECT_EQ(*head_view_named(name), v);
  }
  EXPECT_EQ(names.size(), size_t{12});
  EXPECT_FALSE(head_view_named("s").has_value());  // names are exact, as in the sidecar
  EXPECT_FALSE(head_view_named("row l").has_value());
  EXPECT_EQ(head_view_names(", "), "S, P, dP, dS, O, dQ, dK, dV, O err, dQ err, dK err, dV err");
}

TEST(HeadView, finding_tensors_pick_the_view_that_shows_them) {
  EXPECT_EQ(head_view_of_tensor("q"), HeadView::s);
  EXPECT_EQ(head_view_of_tensor("k"), HeadView::s);
  EXPECT_EQ(head_view_of_tensor("S"), HeadView::s);
  EXPECT_EQ(head_view_of_tensor("lse"), HeadView::o);
  EXPECT_EQ(head_view_of_tensor("o"), HeadView::o);
  EXPECT_EQ(head_view_of_tensor("dq"), HeadView::dq);
  EXPECT_EQ(head_view_of_tensor("dK"), HeadView::dk);
  EXPECT_EQ(head_view_of_tensor("ds"), HeadView::ds);
  for (const char* none : {"v", "dO", "mask", "dQ/dK/dV", "dQ err", ""}) {
    EXPECT_FALSE(head_view_of_tensor(none).has_value()) << none;
  }
}

TEST(HeadView, shapes_and_axes_follow_rows_and_columns) {
  CaseDims d;
  d.seqlen_q = 7;
  d.seqlen_k = 11;
  d.head_dim = 16;
  d.head_dim_v = 24;
  using Shape = std::pair<int64_t, int64_t>;
  EXPECT_EQ(head_view_shape(HeadView::dp, d), (Shape{7, 11}));
  EXPECT_EQ(head_view_shape(HeadView::o_err, d), (Shape{7, 24}));
  EXPECT_EQ(head_view_shape(HeadView::dq, d), (Shape{7, 16}));
  EXPECT_EQ(head_view_shape(HeadView::dk_err, d), (Shape{11, 16}));
  EXPECT_EQ(head_view_shape(HeadView::dv, d), (Shape{11, 24}));
  for (HeadView v : kHeadViews) {
    const bool keys = has_key_rows(v);
    EXPECT_EQ(head_view_shape(v, d).first, keys ? 11 : 7) << head_view_name(v);
    EXPECT_STREQ(head_view_row_label(v), keys ? "key j" : "query i");
    EXPECT_STREQ(head_view_col_label(v), is_score_view(v) ? "key j" : "feature");
    EXPECT_EQ(is_score_view(v), score_view_index(v) >= 0);
    EXPECT_FALSE(is_score_view(v) && is_error_view(v));
  }
  for (int k = 0; k < 4; ++k) EXPECT_EQ(score_view_index(kScoreViews[k]), k);
}

}  // namespace
}  // namespace attnscope::test
