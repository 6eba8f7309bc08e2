// Pins recorded_mismatch (cosine -0.1, 5x norm, a few bad head-dim columns; correct
// recordings pass) and precision_loss (bf16 eager attention with large scores) end to end.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis_test_util.h"

namespace attnscope::testing {
namespace {

constexpr size_t kHead = 16 * 8;  // elements per head of q-shaped tensors

// Four heads with o, lse, dq, dk, dv recorded from the fp64 recomputation.
CaseData recorded_case(Reference64& ref) {
  CaseData c = make_case(spec(4, 4));
  ref = replay_reference(c);
  EXPECT_TRUE(ref.has_gradients);
  put(c, "o", DType::f16, {1, 4, 16, 8}, ref.o);
  put(c, "lse", DType::f32, {1, 4, 16}, ref.lse);
  put(c, "dq", DType::f16, {1, 4, 16, 8}, ref.dq);
  put(c, "dk", DType::f16, {1, 4, 16, 8}, ref.dk);
  put(c, "dv", DType::f16, {1, 4, 16, 8}, ref.dv);
  return c;
}

const Finding& only_mismatch(const CaseAnalysis& a) {
  const auto found = of_kind(a, FindingKind::recorded_mismatch);
  EXPECT_EQ(found.size(), 1u) << summary(a);
  static const Finding none;
  return found.empty() ? none : *found[0];
}

TEST(RecordedFindings, correct_recordings_are_within_the_accuracy_rule) {
  Reference64 ref;
  const CaseAnalysis a = analyze(recorded_case(ref));
  EXPECT_TRUE(a.findings.empty()) << summary(a);
  ASSERT_EQ(a.recorded.size(), 5u);
  for (const RecordedComparison& c : a.recorded) EXPECT_TRUE(c.within_rule) << c.tensor;
}

// The gradient budget bounds precision_loss's fp64 gradients only: recorded gradients are
// checked at any size (a wrong dk is found), and a scan that leaves them out of precision_loss
// says so.
TEST(RecordedFindings, recorded_gradients_are_checked_beyond_the_gradient_budget) {
  Reference64 ref;
  CaseData c = recorded_case(ref);
  std::vector<double> dk = ref.dk;
  for (size_t e = 2 * kHead; e < 3 * kHead; ++e) dk[e] *= 5;
  put(c, "dk", DType::f16, {1, 4, 16, 8}, dk);
  AnalysisSettings tight;
  tight.reference_gradient_budget = 1;
  const CaseAnalysis a = analyze(c, tight);
  EXPECT_TRUE(a.reference_note.empty()) << a.reference_note;
  const Finding& f = only_mismatch(a);
  EXPECT_EQ(f.tensor, "dk");
  EXPECT_EQ(f.head, 2);

  const CaseAnalysis plain = analyze(make_case(spec(4, 4)), tight);
  EXPECT_EQ(plain.reference_note,
            "precision_loss of dq, dk, dv not judged: 1024 scores (B*H*Sq*Sk) are more than "
            "the 1 up to which a scan computes fp64 gradients for it (recorded gradients are "
            "checked at any size)");
}

TEST(RecordedFindings, dv_with_cosine_minus_0_1_is_recorded_mismatch) {
  Reference64 ref;
  CaseData c = recorded_case(ref);
  std::vector<double> dv = ref.dv;
  // dv' = -0.1 dv + sqrt(0.99) w with w orthogonal to dv and as long: cosine -0.1, same norm.
  double* h3 = dv.data() + 3 * kHead;
  std::vector<double> w(kHead);
  double dot = 0, dv_sq = 0, w_sq = 0;
  for (size_t e = 0; e < kHead; ++e) {
    w[e] = std::sin(1.7 * static_cast<double>(e) + 0.2);
    dot += w[e] * h3[e];
    dv_sq += h3[e] * h3[e];
  }
  for (size_t e = 0; e < kHead; ++e) {
    w[e] -= dot / dv_sq * h3[e];
    w_sq += w[e] * w[e];
  }
  for (size_t e = 0; e < kHead; ++e) h3[e] = -0.1 * h3[e] + std::sqrt(0.99 * dv_sq / w_sq) * w[e];
  put(c, "dv", DType::f16, {1, 4, 16, 8}, dv);
  const CaseAnalysis a = analyze(c);
  const Finding& f = only_mismatch(a);
  EXPECT_EQ(f.severity, Severity::error);
  EXPECT_EQ(f.tensor, "dv");
  EXPECT_EQ(f.head, 3);
  EXPECT_NE(f.message.find("cosine -0.100"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("kv head 3"), std::string::npos) << f.message;
}

TEST(RecordedFindings, dk_scaled_5x_is_recorded_mismatch_with_norm_ratio_5) {
  Reference64 ref;
  CaseData c = recorded_case(ref);
  std::vector<double> dk = ref.dk;
  for (size_t e = 2 * kHead; e < 3 * kHead; ++e) dk[e] *= 5;
  put(c, "dk", DType::f16, {1, 4, 16, 8}, dk);
  const CaseAnalysis a = analyze(c);
  const Finding& f = only_mismatch(a);
  EXPECT_EQ(f.tensor, "dk");
  EXPECT_EQ(f.head, 2);
  EXPECT_NE(f.message.find("norm ratio 5"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("cosine 1.000"), std::string::npos) << f.message;
}

TEST(RecordedFindings, few_bad_head_dim_columns_are_named_in_the_mismatch) {
  Reference64 ref;
  CaseData c = recorded_case(ref);
  std::vector<double> dq = ref.dq;
  for (size_t i = 0; i < 16; ++i) {
    dq[kHead + i * 8 + 3] += 0.5;
    dq[kHead + i * 8 + 6] -= 0.5;
  }
  put(c, "dq", DType::f16, {1, 4, 16, 8}, dq);
  const CaseAnalysis a = analyze(c);
  const Finding& f = only_mismatch(a);
  EXPECT_EQ(f.tensor, "dq");
  EXPECT_EQ(f.head, 1);
  EXPECT_NE(f.message.find("columns 3, 6"), std::string::npos) << f.message;
  EXPECT_NE(f.remedy.find("layout/stride"), std::string::npos) << f.remedy;
  ASSERT_EQ(a.recorded[2].tensor, "dq");
  EXPECT_GT(a.recorded[2].heads[1].column_max_error[3], 0.4);
  EXPECT_LT(a.recorded[2].heads[1].column_max_error[4], 0.01);
}

TEST(RecordedFindings, large_scores_in_eager_bf16_are_precision_loss) {
  // Head dim 0 carries 29 in every q and k: S ~ 29^2 / sqrt(8) = 297 + O(1), where bf16's
  // spacing is 2, so the rounded scores lose their differences.
  CaseData c = make_case(spec(1, 1, "bfloat16"));
  std::vector<double> q = values(c, "q"), k = values(c, "k");
  for (size_t i = 0; i < 16; ++i) q[i * 8] = k[i * 8] = 29;
  put(c, "q", DType::bf16, {1, 1, 16, 8}, q);
  put(c, "k", DType::bf16, {1, 1, 16, 8}, k);
  const CaseAnalysis a = analyze(c);
  const auto found = of_kind(a, FindingKind::precision_loss);
  ASSERT_FALSE(found.empty()) << summary(a);
  for (const Finding* f : found) {
    EXPECT_EQ(f->modes, std::vector<std::string>{"unfused"}) << f->message;
    EXPECT_NE(f->message.find("unfused bf16"), std::string::npos) << f->message;
  }
  EXPECT_FALSE(has_kind(a, FindingKind::score_overflow));
}

}  // namespace
}  // namespace attnscope::testing
