// Pins the recorded-output comparison: cosine, norm ratio, accuracy-rule threshold, columns.
#include <gtest/gtest.h>

#include <cmath>

#include "core/analysis/recorded_check.h"

namespace attnscope {
namespace {

// Two heads of 4 rows x 3 columns with a simple deterministic pattern.
std::vector<double> pattern() {
  std::vector<double> x(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7 * static_cast<double>(i) + 0.3);
  return x;
}

RecordedComparisonInputs inputs(const std::vector<double>& rec, const std::vector<double>& ref,
                                const std::vector<double>& base, bool gradient = false) {
  RecordedComparisonInputs in;
  in.tensor = gradient ? "dq" : "o";
  in.geometry = {2, 4, 3, 2};
  in.recorded = &rec;
  in.reference = &ref;
  in.baseline = &base;
  in.gradient = gradient;
  return in;
}

TEST(RecordedCheck, identical_recording_is_within_rule_with_cosine_1) {
  const std::vector<double> ref = pattern();
  const RecordedComparison c = compare_recorded(inputs(ref, ref, ref));
  EXPECT_TRUE(c.within_rule);
  ASSERT_EQ(c.heads.size(), 2u);
  EXPECT_NEAR(c.heads[1].cosine, 1.0, 1e-15);
  EXPECT_DOUBLE_EQ(c.heads[1].norm_ratio, 1.0);
  EXPECT_EQ(c.max_error, 0.0);
}

TEST(RecordedCheck, threshold_is_2x_baseline_error_plus_floor_3x_for_gradients) {
  const std::vector<double> ref = pattern();
  std::vector<double> base = ref;
  base[5] += 1e-3;
  double max_ref = 0;
  for (double x : ref) max_ref = std::fmax(max_ref, std::fabs(x));
  const double floor = accuracy_floor(max_ref);
  EXPECT_NEAR(compare_recorded(inputs(ref, ref, base)).threshold, 2e-3 + floor, 1e-15);
  EXPECT_NEAR(compare_recorded(inputs(ref, ref, base, true)).threshold, 3e-3 + floor, 1e-15);
}

TEST(RecordedCheck, five_times_norm_is_reported_and_breaks_rule) {
  const std::vector<double> ref = pattern();
  std::vector<double> rec = ref;
  for (size_t i = 12; i < 24; ++i) rec[i] *= 5;  // head 1 only
  const RecordedComparison c = compare_recorded(inputs(rec, ref, ref));
  EXPECT_FALSE(c.within_rule);
  EXPECT_TRUE(c.heads[0].within_rule);
  EXPECT_FALSE(c.heads[1].within_rule);
  EXPECT_NEAR(c.heads[1].norm_ratio, 5.0, 1e-12);
  EXPECT_NEAR(c.heads[1].cosine, 1.0, 1e-12);
}

TEST(RecordedCheck, anti_correlated_recording_has_negative_cosine) {
  const std::vector<double> ref = pattern();
  std::vector<double> rec = ref;
  for (size_t i = 0; i < 12; ++i) rec[i] = -ref[i];
  const RecordedComparison c = compare_recorded(inputs(rec, ref, ref, true));
  EXPECT_NEAR(c.heads[0].cosine, -1.0, 1e-12);
  EXPECT_FALSE(c.heads[0].within_rule);
}

TEST(RecordedCheck, bad_column_shows_in_the_column_profile_only) {
  const std::vector<double> ref = pattern();
  std::vector<double> rec = ref;
  for (size_t i = 1; i < 24; i += 3) rec[i] += 0.5;  // column 1 of every row
  const RecordedComparison c = compare_recorded(inputs(rec, ref, ref));
  ASSERT_EQ(c.column_max_error.size(), 3u);
  EXPECT_EQ(c.column_max_error[0], 0.0);
  EXPECT_NEAR(c.column_max_error[1], 0.5, 1e-12);
  EXPECT_EQ(c.column_max_error[2], 0.0);
  EXPECT_FALSE(c.within_rule);
}

TEST(RecordedCheck, nan_where_recomputation_is_finite_counts_as_mismatch) {
  const std::vector<double> ref = pattern();
  std::vector<double> rec = ref;
  rec[3] = std::nan("");
  const RecordedComparison c = compare_recorded(inputs(rec, ref, ref));
  EXPECT_EQ(c.heads[0].nonfinite_mismatch, 1);
  EXPECT_FALSE(c.heads[0].within_rule);
  EXPECT_TRUE(c.heads[1].within_rule);
}

}  // namespace
}  // namespace attnscope
