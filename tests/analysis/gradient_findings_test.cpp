// Pins nonfinite_gradient, gradient_explosion, clip_spreads_nan and the clip report (norms per
// head and row before and after clip_grad_norm_) on crafted cases.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis_test_util.h"

namespace attnscope::testing {
namespace {

// dO of head 0, row 2 holds a NaN.
CaseData nan_dout_case() {
  CaseData c = make_case({});
  std::vector<double> dout = values(c, "do");
  dout[2 * 8 + 1] = std::nan("");
  put(c, "do", DType::f16, {1, 2, 16, 8}, dout);
  return c;
}

TEST(GradientFindings, nan_in_dout_gives_nonfinite_gradient_traced_to_input) {
  const CaseAnalysis a = analyze(nan_dout_case());
  EXPECT_TRUE(has_kind(a, FindingKind::nonfinite_input)) << summary(a);
  const Finding* dq = nullptr;
  for (const Finding* f : of_kind(a, FindingKind::nonfinite_gradient)) {
    if (f->tensor == "dQ") dq = f;
  }
  ASSERT_NE(dq, nullptr) << summary(a);
  EXPECT_EQ(dq->severity, Severity::error);
  EXPECT_EQ(dq->head, 0);
  EXPECT_EQ(dq->rows.first, 2);
  EXPECT_EQ(dq->rows.last, 2);
  EXPECT_NE(dq->message.find("from a non-finite input"), std::string::npos) << dq->message;
  EXPECT_NE(dq->remedy.find("clipping cannot help"), std::string::npos) << dq->remedy;
  EXPECT_FALSE(has_kind(a, FindingKind::nonfinite_output)) << "dO is not read by the forward";
}

TEST(GradientFindings, nonfinite_total_norm_without_clipping_warns_that_clip_spreads_nan) {
  const CaseAnalysis a = analyze(nan_dout_case());
  const auto found = of_kind(a, FindingKind::clip_spreads_nan);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->severity, Severity::warning);
  EXPECT_NE(found[0]->message.find("if clipped"), std::string::npos);
  EXPECT_NE(found[0]->message.find("coef = NaN"), std::string::npos) << found[0]->message;
  EXPECT_NE(found[0]->remedy.find("clipping cannot help"), std::string::npos);
}

TEST(GradientFindings, clipping_a_nan_total_is_error_and_turns_every_gradient_nan) {
  AnalysisSettings s;
  s.run.clip_norm = 1.0;
  const CaseAnalysis a = analyze(nan_dout_case(), s);
  const auto found = of_kind(a, FindingKind::clip_spreads_nan);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0]->severity, Severity::error);
  ASSERT_EQ(a.clips.size(), 2u);
  for (const ClipReport& c : a.clips) {
    ASSERT_EQ(c.clips.size(), 1u);
    EXPECT_TRUE(c.clips[0].nonfinite_total);
    for (float x : c.clipped.dk) EXPECT_TRUE(std::isnan(x));
    for (double n : c.after.dq_head) EXPECT_TRUE(std::isnan(n));
  }
}

// dO of head 2 scaled by 1e6: its dQ / dK / dV explode.
CaseData exploding_case() {
  CaseData c = make_case(spec(4, 4, "float32"));
  std::vector<double> dout = values(c, "do");
  for (size_t e = 2 * 16 * 8; e < 3 * 16 * 8; ++e) dout[e] *= 1e6;
  put(c, "do", DType::f32, {1, 4, 16, 8}, dout);
  return c;
}

TEST(GradientFindings, head_with_1e6_upstream_gradient_is_gradient_explosion) {
  const CaseAnalysis a = analyze(exploding_case());
  const auto found = of_kind(a, FindingKind::gradient_explosion);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  const Finding& f = *found[0];
  EXPECT_EQ(f.severity, Severity::warning);
  EXPECT_EQ(f.head, 2);
  EXPECT_EQ(f.tensor, "dQ/dK/dV");
  EXPECT_EQ(f.modes, (std::vector<std::string>{"fused", "unfused"}));
  EXPECT_NE(f.message.find("upstream ||dO|| of this head"), std::string::npos) << f.message;
  EXPECT_NE(f.remedy.find("clip_grad_norm_(max_norm=1) would scale every gradient by"),
            std::string::npos)
      << f.remedy;
  EXPECT_FALSE(has_error(a.findings)) << summary(a);
}

TEST(GradientFindings, clip_report_scales_every_head_by_one_coefficient) {
  AnalysisSettings s;
  s.run.clip_norm = 1.0;
  const CaseAnalysis a = analyze(exploding_case(), s);
  ASSERT_EQ(a.clips.size(), 2u);
  for (const ClipReport& c : a.clips) {
    ASSERT_EQ(c.clips.size(), 1u);
    const double coef = c.clips[0].coef;
    EXPECT_NEAR(coef, 1.0 / (c.before.total + 1e-6), 1e-12);
    EXPECT_NEAR(c.after.total, 1.0, 1e-4);
    for (size_t h = 0; h < 4; ++h) {
      EXPECT_NEAR(c.after.dq_head[h], c.before.dq_head[h] * coef,
                  1e-5 * c.before.dq_head[h] * coef);
    }
    ASSERT_EQ(c.before.dq_row.size(), 64u);
    EXPECT_LT(c.after.dq_row[0], c.before.dq_row[0]);
  }
}

TEST(GradientFindings, per_kv_head_clip_scope_clips_each_group_alone) {
  AnalysisSettings s;
  s.run.clip_norm = 1.0;
  s.run.clip_scope = ClipScope::per_kv_head;
  s.run.modes = {Mode::fused};
  const CaseAnalysis a = analyze(exploding_case(), s);
  ASSERT_EQ(a.clips.size(), 1u);
  ASSERT_EQ(a.clips[0].clips.size(), 4u);
  EXPECT_LT(a.clips[0].clips[2].coef, 1e-5);
  const double expected = a.clips[0].before.dq_head[0] * a.clips[0].clips[0].coef;
  EXPECT_NEAR(a.clips[0].after.dq_head[0], expected, 1e-6 * expected);
  EXPECT_GT(a.clips[0].clips[0].coef, 1e-3) << "group 0 is not shrunk by head 2's explosion";
}

}  // namespace
}  // namespace attnscope::testing
