// The "must not fire" half of the findings tests: for each kind, a case close to one that
// triggers it (same shapes, same construction, one thing changed) where the kind is absent.
// The triggering halves live in the *_findings_test.cpp files; /work/helpers/cli_kinds.md
// and the README list the pairs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "analysis_test_util.h"

namespace attnscope::testing {
namespace {

// Row 15 of the single head sees only the keys where keep(j) is true.
CaseData row_15_case(const std::string& dtype, bool (*keep)(int64_t)) {
  CaseData c = make_case(spec(1, 1, dtype));
  std::vector<double> mask(16 * 16, 1.0);
  for (int64_t j = 0; j < 16; ++j) mask[static_cast<size_t>(15 * 16 + j)] = keep(j) ? 1 : 0;
  put(c, "mask", DType::boolean, {1, 1, 16, 16}, mask);
  return c;
}

TEST(NoFalseAlarm, neg_1e9_fill_in_fp32_is_representable_not_mask_fill_overflow) {
  // Same as bool_mask_fill_minus_1e9_overflows_only_in_unfused_fp16, run in fp32.
  AnalysisSettings s;
  s.run.mask_fill = MaskFill::neg_1e9;
  const CaseAnalysis a = analyze(row_15_case("float32", [](int64_t) { return false; }), s);
  EXPECT_FALSE(has_kind(a, FindingKind::mask_fill_overflow)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::nonfinite_output)) << summary(a);
  const auto rows = of_kind(a, FindingKind::fully_masked_row);
  ASSERT_EQ(rows.size(), 1u) << summary(a);
  EXPECT_EQ(rows[0]->severity, Severity::warning) << "attends uniformly, not NaN";
}

TEST(NoFalseAlarm, neg_inf_fill_in_fp16_is_intentional_not_mask_fill_overflow) {
  // The -inf fill is the mask itself: the empty row is fully_masked_row, nothing else.
  const CaseAnalysis a = analyze(row_15_case("float16", [](int64_t) { return false; }));
  EXPECT_FALSE(has_kind(a, FindingKind::mask_fill_overflow)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::score_overflow)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::nonfinite_input)) << summary(a);
  EXPECT_TRUE(has_kind(a, FindingKind::fully_masked_row)) << summary(a);
}

TEST(NoFalseAlarm, row_with_one_visible_key_is_not_fully_masked) {
  const CaseAnalysis a = analyze(row_15_case("float16", [](int64_t j) { return j == 9; }));
  EXPECT_TRUE(a.findings.empty()) << summary(a);
  EXPECT_EQ(a.stats.fully_masked_rows, 0);
}

TEST(NoFalseAlarm, nan_value_at_a_visible_key_is_bad_input_not_masked_nan_leak) {
  // Same NaN as nan_value_at_masked_key_leaks_into_rows_that_cannot_see_it, key not masked.
  CaseData c = make_case(spec(1, 1));
  std::vector<double> v = values(c, "v");
  v[3 * 8] = std::nan("");
  put(c, "v", DType::f16, {1, 1, 16, 8}, v);
  const CaseAnalysis a = analyze(c);
  EXPECT_FALSE(has_kind(a, FindingKind::masked_nan_leak)) << summary(a);
  EXPECT_TRUE(has_kind(a, FindingKind::nonfinite_input)) << summary(a);
  EXPECT_TRUE(has_kind(a, FindingKind::nonfinite_output)) << summary(a);
}

TEST(NoFalseAlarm, lse_near_minus_77_is_not_exp_overflow) {
  // Same as lse_below_minus_88_is_an_exp_overflow_note with a bias of -80 instead of -200.
  CaseData c = make_case(spec(1, 1, "float32"));
  put(c, "bias", DType::f32, {1, 1, 1, 1}, {-80.0});
  const CaseAnalysis a = analyze(c);
  EXPECT_TRUE(a.findings.empty()) << summary(a);
  for (const RunStats& r : a.stats.runs) EXPECT_GT(r.min_lse, -88.7);
}

TEST(NoFalseAlarm, recorded_lse_equal_to_the_recomputation_is_not_exp_overflow) {
  CaseData c = make_case(spec(1, 1, "float32"));
  put(c, "lse", DType::f32, {1, 1, 16}, replay_reference(c).lse);
  const CaseAnalysis a = analyze(c);
  EXPECT_TRUE(a.findings.empty()) << summary(a);
}

// dO of head 2 scaled by `factor` in fp32.
CaseData scaled_dout_case(double factor, bool every_head) {
  CaseData c = make_case(spec(4, 4, "float32"));
  std::vector<double> dout = values(c, "do");
  const size_t head = 16 * 8;
  for (size_t e = every_head ? 0 : 2 * head; e < (every_head ? 4 : 3) * head; ++e)
    dout[e] *= factor;
  put(c, "do", DType::f32, {1, 4, 16, 8}, dout);
  return c;
}

TEST(NoFalseAlarm, huge_but_finite_fp32_gradients_are_not_nonfinite_gradient) {
  // The gradient_explosion case: 1e6 x dO stays far inside fp32.
  const CaseAnalysis a = analyze(scaled_dout_case(1e6, false));
  EXPECT_TRUE(has_kind(a, FindingKind::gradient_explosion)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::nonfinite_gradient)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::clip_spreads_nan)) << summary(a);
}

TEST(NoFalseAlarm, head_with_10x_upstream_gradient_is_not_an_explosion) {
  EXPECT_FALSE(has_kind(analyze(scaled_dout_case(10, false)), FindingKind::gradient_explosion));
}

TEST(NoFalseAlarm, every_head_1e6_larger_is_uniform_not_an_explosion) {
  const CaseAnalysis a = analyze(scaled_dout_case(1e6, true));
  EXPECT_TRUE(a.findings.empty()) << summary(a);
}

TEST(NoFalseAlarm, clipping_a_finite_total_does_not_spread_nan) {
  // clipping_a_nan_total_is_error_and_turns_every_gradient_nan with a finite total instead.
  AnalysisSettings s;
  s.run.clip_norm = 1.0;
  const CaseAnalysis a = analyze(scaled_dout_case(1e6, false), s);
  EXPECT_FALSE(has_kind(a, FindingKind::clip_spreads_nan)) << summary(a);
  ASSERT_EQ(a.clips.size(), 2u);
  for (const ClipReport& c : a.clips) {
    EXPECT_FALSE(c.clips[0].nonfinite_total);
    for (float x : c.clipped.dq) EXPECT_TRUE(std::isfinite(x));
  }
}

TEST(NoFalseAlarm, overflowing_fp16_case_in_bf16_has_no_nonfinite_output_or_gradient) {
  // forward_findings_test's overflow_case (q.k ~ 9e4 in head 1), run in bf16.
  CaseData c = make_case({});
  std::vector<double> q = values(c, "q"), k = values(c, "k");
  for (int64_t i = 4; i < 8; ++i) q[static_cast<size_t>((16 + i) * 8)] = 300;
  for (int64_t j = 0; j < 16; ++j) k[static_cast<size_t>((16 + j) * 8)] = 300;
  put(c, "q", DType::f16, {1, 2, 16, 8}, q);
  put(c, "k", DType::f16, {1, 2, 16, 8}, k);
  AnalysisSettings s;
  s.run.precision = Precision::bf16;
  const CaseAnalysis a = analyze(c, s);
  EXPECT_FALSE(has_kind(a, FindingKind::score_overflow)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::nonfinite_output)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::nonfinite_gradient)) << summary(a);
}

// Head dim 0 of every q and k carries `outlier` (large_scores_in_eager_bf16_are_precision_loss
// uses 29 in bf16).
CaseData outlier_case(const std::string& dtype, DType stored, double outlier) {
  CaseData c = make_case(spec(1, 1, dtype));
  std::vector<double> q = values(c, "q"), k = values(c, "k");
  for (size_t i = 0; i < 16; ++i) q[i * 8] = k[i * 8] = outlier;
  put(c, "q", stored, {1, 1, 16, 8}, q);
  put(c, "k", stored, {1, 1, 16, 8}, k);
  return c;
}

TEST(NoFalseAlarm, large_scores_in_fp32_or_fused_bf16_are_not_precision_loss) {
  EXPECT_FALSE(
      has_kind(analyze(outlier_case("float32", DType::f32, 29)), FindingKind::precision_loss));
  AnalysisSettings fused;
  fused.run.modes = {Mode::fused};
  const CaseAnalysis a = analyze(outlier_case("bfloat16", DType::bf16, 29), fused);
  EXPECT_FALSE(has_kind(a, FindingKind::precision_loss)) << summary(a);
}

TEST(NoFalseAlarm, ordinary_scores_in_eager_bf16_are_not_precision_loss) {
  const CaseAnalysis a = analyze(outlier_case("bfloat16", DType::bf16, 2));
  EXPECT_FALSE(has_kind(a, FindingKind::precision_loss)) << summary(a);
}

TEST(NoFalseAlarm, zero_value_row_at_a_key_others_also_see_is_not_silent_zero_row) {
  // zero_values_at_the_only_visible_key_give_silent_zero_row without the causal mask: row 0
  // sees 16 keys, so a zero v_0 does not zero its output.
  CaseData c = make_case(spec(1, 1));
  std::vector<double> v = values(c, "v");
  for (int64_t d = 0; d < 8; ++d) v[static_cast<size_t>(d)] = 0;
  put(c, "v", DType::f16, {1, 1, 16, 8}, v);
  const CaseAnalysis a = analyze(c);
  EXPECT_TRUE(a.findings.empty()) << summary(a);
}

}  // namespace
}  // namespace attnscope::testing
