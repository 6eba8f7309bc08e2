// first_bad_case (core/analysis/first_bad_case.h): the origin of a forward failure is its first
// bad layer (later layers and, through dO, earlier gradients are its consequences); a
// gradient-only failure starts in the last layer whose dO was still finite; later steps are
// counted.
#include <gtest/gtest.h>

#include "core/analysis/first_bad_case.h"

namespace attnscope {
namespace {

CaseVerdict verdict(int64_t step, int64_t layer, bool forward, bool backward, bool dout_nan) {
  CaseVerdict v;
  v.path = "/step_" + std::to_string(step) + "/layer_" + std::to_string(layer);
  v.step = step;
  v.layer = layer;
  v.forward_error = forward;
  v.backward_error = backward;
  v.dout_nonfinite = dout_nan;
  if (forward) v.kinds.push_back("nonfinite_input");
  if (backward) v.kinds.push_back("nonfinite_gradient");
  v.forward_lead = "forward lead";
  v.backward_lead = "backward lead";
  return v;
}

TEST(FirstBadCase, clean_dump_has_none) {
  EXPECT_FALSE(first_bad_case({verdict(0, 0, false, false, false)}));
  EXPECT_FALSE(first_bad_case({}));
}

TEST(FirstBadCase, forward_failure_in_layer_1_poisons_layer_2_forward_and_layer_0_gradients) {
  const std::vector<CaseVerdict> v = {verdict(0, 0, false, true, true),
                                      verdict(0, 1, true, true, true),
                                      verdict(0, 2, true, true, true)};
  const auto first = first_bad_case(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 1u);
  EXPECT_FALSE(first->from_backward);
  EXPECT_EQ(first->forward_into, std::vector<size_t>{2});
  EXPECT_EQ(first->backward_into, std::vector<size_t>{0});
  EXPECT_EQ(first->lead, "forward lead");
  EXPECT_NE(first->text.find("step 0, layer 1"), std::string::npos) << first->text;
}

TEST(FirstBadCase, gradient_only_failure_starts_in_the_last_layer_with_a_finite_do) {
  // Layer 2's backward made NaN (its dO was finite); layers 1 and 0 got it through dO.
  const std::vector<CaseVerdict> v = {
      verdict(0, 0, false, true, true), verdict(0, 1, false, true, true),
      verdict(0, 2, false, true, false), verdict(0, 3, false, false, false)};
  const auto first = first_bad_case(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 2u);
  EXPECT_TRUE(first->from_backward);
  EXPECT_EQ(first->backward_into, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(first->forward_into.empty());
  EXPECT_EQ(first->lead, "backward lead");
}

TEST(FirstBadCase, earliest_bad_step_wins_and_later_steps_are_listed) {
  const std::vector<CaseVerdict> v = {
      verdict(3, 0, false, false, false), verdict(4, 0, false, false, false),
      verdict(4, 1, true, false, false), verdict(5, 0, true, false, false),
      verdict(6, 1, true, false, false)};
  const auto first = first_bad_case(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 2u);
  EXPECT_EQ(first->later_steps, (std::vector<int64_t>{5, 6}));
  EXPECT_NE(first->text.find("2 later steps"), std::string::npos) << first->text;
}

}  // namespace
}  // namespace attnscope
