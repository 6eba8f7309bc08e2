// Pins score_overflow, fully_masked_row, exp_overflow, nonfinite_output and silent_zero_row
// on crafted cases, and that a healthy case with correct recordings has no finding at all.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis_test_util.h"
#include "core/analysis/remedies.h"

namespace attnscope::testing {
namespace {

// Head 1, rows 4-7 of q and every key of k carry 300 in head dim 0: q.k ~ 9e4 > 65504 while
// S = q.k / sqrt(8) ~ 3.2e4 stays in range (only the unscaled matmul overflows).
CaseData overflow_case() {
  CaseData c = make_case({});
  std::vector<double> q = values(c, "q"), k = values(c, "k");
  for (int64_t i = 4; i < 8; ++i) q[static_cast<size_t>((16 + i) * 8)] = 300;
  for (int64_t j = 0; j < 16; ++j) k[static_cast<size_t>((16 + j) * 8)] = 300;
  put(c, "q", DType::f16, {1, 2, 16, 8}, q);
  put(c, "k", DType::f16, {1, 2, 16, 8}, k);
  return c;
}

TEST(ForwardFindings, score_overflow_of_unscaled_qk_is_error_in_unfused_fp16_only) {
  const CaseAnalysis a = analyze(overflow_case());
  const auto found = of_kind(a, FindingKind::score_overflow);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  const Finding& f = *found[0];
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_EQ(f.head, 1);
  EXPECT_EQ(f.rows.first, 4);
  EXPECT_EQ(f.rows.last, 7);
  EXPECT_EQ(f.modes, std::vector<std::string>{"unfused"});
  EXPECT_NE(f.message.find("max |q.k| = 9"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("> 65504 (fp16 max)"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("finite in fused fp16"), std::string::npos) << f.message;
  EXPECT_EQ(f.remedy.rfind("scale q before the matmul", 0), 0u) << f.remedy;  // scaled, S fits
  EXPECT_NE(f.remedy.find("bf16"), std::string::npos);
  // Where the scaled scores overflow too, scaling q first is no fix: lowering the scale leads.
  const std::string beyond = remedy_score_overflow(Precision::f16, 1.06e5);
  EXPECT_EQ(beyond.rfind("lower the scale or normalise q and k", 0), 0u) << beyond;
  EXPECT_NE(beyond.find("alone does not help"), std::string::npos) << beyond;
  ASSERT_TRUE(a.stats.max_abs_qk.has_value());
  EXPECT_GT(*a.stats.max_abs_qk, 65504);
  EXPECT_TRUE(has_kind(a, FindingKind::nonfinite_output)) << summary(a);
}

TEST(ForwardFindings, score_overflow_risk_in_fused_only_run_is_warning) {
  AnalysisSettings s;
  s.run.modes = {Mode::fused};
  const CaseAnalysis a = analyze(overflow_case(), s);
  const auto found = of_kind(a, FindingKind::score_overflow);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]->severity, Severity::warning);
  EXPECT_NE(found[0]->message.find("eager (unfused) fp16 attention would overflow"),
            std::string::npos)
      << found[0]->message;
}

TEST(ForwardFindings, score_overflow_absent_in_bf16) {
  CaseData c = overflow_case();
  AnalysisSettings s;
  s.run.precision = Precision::bf16;
  EXPECT_FALSE(has_kind(analyze(c, s), FindingKind::score_overflow));
}

// Row 15 of the single head sees no key.
CaseData empty_row_case(const std::string& dtype) {
  CaseData c = make_case(spec(1, 1, dtype));
  std::vector<double> mask(16 * 16, 1.0);
  for (int64_t j = 0; j < 16; ++j) mask[static_cast<size_t>(15 * 16 + j)] = 0;
  put(c, "mask", DType::boolean, {1, 1, 16, 16}, mask);
  return c;
}

TEST(ForwardFindings, fully_masked_row_with_neg_inf_fill_is_nan_error) {
  const CaseAnalysis a = analyze(empty_row_case("float16"));
  const auto found = of_kind(a, FindingKind::fully_masked_row);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->severity, Severity::error);
  EXPECT_EQ(found[0]->rows.first, 15);
  EXPECT_EQ(found[0]->rows.last, 15);
  EXPECT_NE(found[0]->message.find("O = NaN in fused and unfused fp16"), std::string::npos)
      << found[0]->message;
  const auto out = of_kind(a, FindingKind::nonfinite_output);
  ASSERT_FALSE(out.empty());
  EXPECT_NE(out[0]->message.find("from fully_masked_row"), std::string::npos) << out[0]->message;
  EXPECT_EQ(a.stats.fully_masked_rows, 1);
}

TEST(ForwardFindings, fully_masked_row_under_safe_softmax_is_info_with_zero_output) {
  AnalysisSettings s;
  s.run.mask_fill = MaskFill::safe;
  const CaseAnalysis a = analyze(empty_row_case("float16"), s);
  const auto found = of_kind(a, FindingKind::fully_masked_row);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->severity, Severity::info);
  EXPECT_NE(found[0]->message.find("O = 0"), std::string::npos);
  EXPECT_FALSE(has_kind(a, FindingKind::nonfinite_output)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::silent_zero_row)) << "fully masked, not silent";
}

TEST(ForwardFindings, fully_masked_row_with_finite_fill_attends_uniformly_warning) {
  AnalysisSettings s;
  s.run.mask_fill = MaskFill::finfo_min;
  const CaseAnalysis a = analyze(empty_row_case("float32"), s);
  const auto found = of_kind(a, FindingKind::fully_masked_row);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]->severity, Severity::warning);
  EXPECT_NE(found[0]->message.find("uniformly"), std::string::npos) << found[0]->message;
}

// An fp16 eager padding row of finite sentinels: bias -65504 (finfo.min) on every key of row 15,
// whose scores are about -35. Unfused fp16 rounds S + bias (-65539) to -inf, so the row is
// NaN; the fused kernel adds in fp32 and attends uniformly. The finding names the mechanism and
// the fix.
TEST(ForwardFindings, finite_sentinel_row_that_overflows_to_neg_inf_names_mechanism_and_fix) {
  CaseData c = make_case(spec(1, 1, "float16"));
  std::vector<double> q = values(c, "q"), k = values(c, "k");
  for (int64_t d = 0; d < 8; ++d) q[static_cast<size_t>(15 * 8 + d)] = d == 0 ? -100 : 0;
  for (int64_t j = 0; j < 16; ++j) k[static_cast<size_t>(j * 8)] = 1;
  put(c, "q", DType::f16, {1, 1, 16, 8}, q);
  put(c, "k", DType::f16, {1, 1, 16, 8}, k);
  std::vector<double> bias(16 * 16, 0.0);
  for (int64_t j = 0; j < 16; ++j) bias[static_cast<size_t>(15 * 16 + j)] = -65504;
  put(c, "bias", DType::f16, {1, 1, 16, 16}, bias);
  const CaseAnalysis a = analyze(c);
  const auto found = of_kind(a, FindingKind::fully_masked_row);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  const Finding& f = *found[0];
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_NE(f.message.find("O = NaN in unfused fp16"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("rounds to -inf"), std::string::npos) << f.message;
  EXPECT_EQ(f.remedy.rfind("clamp the masked scores", 0), 0u) << f.remedy;
  EXPECT_NE(f.remedy.find("dtype=torch.float32"), std::string::npos) << f.remedy;
}

TEST(ForwardFindings, lse_below_minus_88_is_an_exp_overflow_note) {
  CaseData c = make_case(spec(1, 1, "float32"));
  put(c, "bias", DType::f32, {1, 1, 1, 1}, {-200.0});
  const CaseAnalysis a = analyze(c);
  const auto found = of_kind(a, FindingKind::exp_overflow);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->severity, Severity::info);
  EXPECT_EQ(found[0]->tensor, "LSE");
  EXPECT_EQ(found[0]->count, 16);
  EXPECT_FALSE(has_error(a.findings)) << summary(a);
}

TEST(ForwardFindings, recorded_lse_far_below_the_scores_is_exp_overflow_error) {
  CaseData c = make_case(spec(1, 1, "float32"));
  std::vector<double> lse = replay_reference(c).lse;
  lse[2] -= 100;
  put(c, "lse", DType::f32, {1, 1, 16}, lse);
  const CaseAnalysis a = analyze(c);
  const auto found = of_kind(a, FindingKind::exp_overflow);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]->severity, Severity::error);
  EXPECT_EQ(found[0]->tensor, "lse");
  EXPECT_EQ(found[0]->rows.first, 2);
  EXPECT_EQ(found[0]->rows.last, 2);
}

TEST(ForwardFindings, zero_values_at_the_only_visible_key_give_silent_zero_row) {
  CaseData c = make_case(spec(1, 1));
  c.info.config.causal = true;  // row 0 sees key 0 only
  std::vector<double> v = values(c, "v");
  for (int64_t d = 0; d < 8; ++d) v[static_cast<size_t>(d)] = 0;
  put(c, "v", DType::f16, {1, 1, 16, 8}, v);
  const CaseAnalysis a = analyze(c);
  const auto found = of_kind(a, FindingKind::silent_zero_row);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->severity, Severity::warning);
  EXPECT_EQ(found[0]->rows.first, 0);
  EXPECT_EQ(found[0]->rows.last, 0);
}

TEST(ForwardFindings, recorded_o_with_zero_row_is_silent_zero_row_error) {
  CaseData c = make_case(spec(1, 1));
  std::vector<double> o = replay_reference(c).o;
  for (int64_t d = 0; d < 8; ++d) o[static_cast<size_t>(3 * 8 + d)] = 0;
  put(c, "o", DType::f16, {1, 1, 16, 8}, o);
  const CaseAnalysis a = analyze(c);
  const auto zero = of_kind(a, FindingKind::silent_zero_row);
  ASSERT_EQ(zero.size(), 1u) << summary(a);
  EXPECT_EQ(zero[0]->severity, Severity::error);
  EXPECT_EQ(zero[0]->tensor, "o");
  EXPECT_EQ(zero[0]->rows.first, 3);
  EXPECT_TRUE(has_kind(a, FindingKind::recorded_mismatch));
}

TEST(ForwardFindings, healthy_case_with_correct_recordings_has_no_findings) {
  CaseData c = make_case(spec(4, 2));
  c.info.config.causal = true;
  const Reference64 ref = replay_reference(c);
  put(c, "o", DType::f16, {1, 4, 16, 8}, ref.o);
  put(c, "lse", DType::f32, {1, 4, 16}, ref.lse);
  const CaseAnalysis a = analyze(c);
  EXPECT_TRUE(a.findings.empty()) << summary(a);
  ASSERT_EQ(a.recorded.size(), 2u);
  EXPECT_TRUE(a.recorded[0].within_rule);
  EXPECT_TRUE(a.recorded[1].within_rule);
  ASSERT_EQ(a.runs.size(), 2u);
  EXPECT_TRUE(a.runs[0].trace.forward.valid && a.runs[1].trace.backward.valid);
}

}  // namespace
}  // namespace attnscope::testing
