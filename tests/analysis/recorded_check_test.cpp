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
  in.recorded = values_of(rec);
  in.reference = &ref;
  in.baseline = values_of(base);
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

// A saturated fp16 head: the unfused fp16 replay is nearly exact, so the 3x rule (3 x 1e-7 +
// the floor) falls below one fp16 ulp of the values (|x| ~ 2: ulp 2^-9). The recording rounded
// to fp16 is as close as fp16 can be: within the rule. An element 4 ulps off is still found.
TEST(RecordedCheck, nonfinite_the_replay_reproduces_is_no_mismatch) {
  // An eager fp16 kernel's Q K^T overflows: the recording and the replay of that kernel are
  // NaN / inf at the same elements where fp64 stays finite. A NaN the replay does not have,
  // or an inf of the other sign, still breaks the rule.
  const std::vector<double> ref = pattern();
  std::vector<double> rec = ref, replay = ref;
  rec[2] = replay[2] = NAN;
  rec[14] = replay[14] = INFINITY;
  RecordedComparisonInputs in = inputs(rec, ref, ref);
  in.same_precision = values_of(replay);
  RecordedComparison c = compare_recorded(in);
  EXPECT_TRUE(c.within_rule);
  EXPECT_EQ(c.heads[0].replay_nonfinite, 1);
  EXPECT_EQ(c.heads[1].replay_nonfinite, 1);
  EXPECT_EQ(c.heads[0].recorded_only, 0);

  replay[14] = -INFINITY;
  rec[20] = NAN;
  c = compare_recorded(in);
  EXPECT_TRUE(c.heads[0].within_rule);
  EXPECT_FALSE(c.heads[1].within_rule);
  EXPECT_EQ(c.heads[1].replay_nonfinite, 0);
  EXPECT_EQ(c.heads[1].recorded_only, 2);
  EXPECT_EQ(c.heads[1].nonfinite_mismatch, 2);
  EXPECT_EQ(c.heads[1].bad_row_first, 0);  // element 14 of the head's 12: row 0 ... 20: row 2
  EXPECT_EQ(c.heads[1].bad_row_last, 2);
}

TEST(RecordedCheck, allowance_is_never_below_one_stored_ulp) {
  std::vector<double> ref = pattern();
  for (double& x : ref) x = 1.5 + 0.4 * x;  // |x| in [1.1, 1.9]: fp16 ulp 2^-10
  std::vector<double> base = ref;
  base[2] += 1e-7;
  std::vector<double> rec(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    rec[i] = std::ldexp(std::nearbyint(std::ldexp(ref[i], 10)), -10);  // rounded to fp16
  }
  RecordedComparisonInputs in = inputs(rec, ref, base, true);
  EXPECT_FALSE(compare_recorded(in).within_rule);  // judged as if fp64 had been stored
  in.stored = Precision::f16;
  const RecordedComparison rounded = compare_recorded(in);
  EXPECT_TRUE(rounded.within_rule) << rounded.max_error << " vs " << rounded.threshold;
  std::vector<double> off = rec;
  off[17] += 4 * std::ldexp(1.0, -10);  // a kernel error of 4 ulps in head 1
  in.recorded = values_of(off);
  const RecordedComparison found = compare_recorded(in);
  EXPECT_FALSE(found.within_rule);
  EXPECT_TRUE(found.heads[0].within_rule);
  EXPECT_FALSE(found.heads[1].within_rule);
  EXPECT_EQ(found.heads[1].bad_row_first, 1);  // element 17 = head 1, row 1, column 2
}

TEST(RecordedCheck, finite_pairs_count_the_values_actually_compared) {
  const std::vector<double> ref = pattern();
  EXPECT_EQ(compare_recorded(inputs(ref, ref, ref)).finite_pairs, 24);
  const std::vector<double> nan(24, std::nan(""));
  const RecordedComparison none = compare_recorded(inputs(nan, nan, nan));
  EXPECT_TRUE(none.within_rule);  // the same non-finite pattern
  EXPECT_EQ(none.finite_pairs, 0);
}

TEST(RecordedCheck, storage_ulp_is_the_spacing_at_the_magnitude) {
  EXPECT_EQ(storage_ulp(Precision::f16, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(storage_ulp(Precision::f16, -1000.0), 0.5);               // 2^9 * 2^-10
  EXPECT_EQ(storage_ulp(Precision::f16, 0.0), std::ldexp(1.0, -24));  // subnormal spacing
  EXPECT_EQ(storage_ulp(Precision::bf16, 3.0), std::ldexp(1.0, -6));
  EXPECT_EQ(storage_ulp(Precision::f32, 1.0), std::ldexp(1.0, -23));
}

}  // namespace
}  // namespace attnscope
