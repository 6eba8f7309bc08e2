// Convention checks (core/analysis/recorded_conventions.h): a recorded LSE in base 2 or scaled
// by ln 2, and a mask of the opposite polarity, are named as recorded_convention instead of
// recorded_mismatch; a wrong LSE that no convention explains stays a mismatch.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis_test_util.h"
#include "core/analysis/reference64.h"

namespace attnscope::testing {
namespace {

constexpr double kLn2 = 0.69314718055994530942;

// An fp32 case recorded from its own fp64 replay (o and lse), lse multiplied by `factor`.
CaseData with_recorded_lse(double factor) {
  CaseData c = make_case(spec(2, 2, "float32"));
  Result<CaseInputs> in = make_case_inputs(c, RunChoice{});
  EXPECT_TRUE(in.ok());
  const Reference64 ref = compute_reference64(*in, false, 1);
  std::vector<double> lse = ref.lse;
  for (double& x : lse) x *= factor;
  put(c, "o", DType::f32, {1, 2, 16, 8}, ref.o);
  put(c, "lse", DType::f32, {1, 2, 16}, lse);
  return c;
}

const Finding* convention(const CaseAnalysis& a) {
  const auto found = of_kind(a, FindingKind::recorded_convention);
  return found.empty() ? nullptr : found[0];
}

TEST(RecordedConventions, base_2_lse_is_named_not_a_mismatch) {
  const CaseAnalysis a = analyze(with_recorded_lse(1 / kLn2));
  ASSERT_NE(convention(a), nullptr) << summary(a);
  EXPECT_EQ(convention(a)->severity, Severity::warning);
  EXPECT_NE(convention(a)->message.find("base 2"), std::string::npos);
  EXPECT_FALSE(has_kind(a, FindingKind::recorded_mismatch)) << summary(a);
}

TEST(RecordedConventions, lse_scaled_by_ln2_names_the_flex_bug) {
  const CaseAnalysis a = analyze(with_recorded_lse(kLn2));
  ASSERT_NE(convention(a), nullptr) << summary(a);
  EXPECT_NE(convention(a)->message.find("181645"), std::string::npos);
  EXPECT_FALSE(has_kind(a, FindingKind::recorded_mismatch)) << summary(a);
}

TEST(RecordedConventions, an_lse_no_convention_explains_stays_a_mismatch) {
  const CaseAnalysis a = analyze(with_recorded_lse(1.5));
  EXPECT_EQ(convention(a), nullptr) << summary(a);
  EXPECT_TRUE(has_kind(a, FindingKind::recorded_mismatch)) << summary(a);
}

TEST(RecordedConventions, inverted_mask_polarity_is_recognised_and_analysed_inverted) {
  CaseData c = make_case(spec(2, 2, "float32"));
  std::vector<double> attend(16 * 16, 1.0);
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t j = 0; j < 16; ++j) attend[static_cast<size_t>(i * 16 + j)] = j <= i + 2;
  }
  put(c, "mask", DType::boolean, {1, 1, 16, 16}, attend);
  Result<CaseInputs> in = make_case_inputs(c, RunChoice{});
  ASSERT_TRUE(in.ok());
  const Reference64 ref = compute_reference64(*in, false, 1);
  put(c, "o", DType::f32, {1, 2, 16, 8}, ref.o);
  // The dump stores the mask the other way round (True = masked out).
  std::vector<double> masked_out = attend;
  for (double& m : masked_out) m = m != 0 ? 0.0 : 1.0;
  put(c, "mask", DType::boolean, {1, 1, 16, 16}, masked_out);
  const CaseAnalysis a = analyze(c);
  ASSERT_NE(convention(a), nullptr) << summary(a);
  EXPECT_EQ(convention(a)->tensor, "mask");
  EXPECT_NE(convention(a)->message.find("TransformerEngine"), std::string::npos);
  EXPECT_FALSE(has_kind(a, FindingKind::recorded_mismatch)) << summary(a);
  for (const RecordedComparison& r : a.recorded) EXPECT_TRUE(r.within_rule) << r.tensor;
}

TEST(RecordedConventions, sequence_major_lse_is_read_transposed_and_named) {
  CaseDims d{2, 3, 3, 5, 5, 4, 4};
  EXPECT_TRUE(lse_sequence_major({2, 5, 3}, d));
  EXPECT_FALSE(lse_sequence_major({2, 3, 5}, d));
  d.heads = d.seqlen_q = 5;  // the shapes agree: canonical
  EXPECT_FALSE(lse_sequence_major({2, 5, 5}, d));
  HostTensor stored = HostTensor::from_double(DType::f32, {1, 2, 3}, {0, 1, 2, 10, 11, 12});
  const HostTensor canonical = to_canonical("lse", stored, Layout::bhsd, {1, 3, 3, 2, 2, 4, 4});
  EXPECT_EQ(canonical.shape, (std::vector<int64_t>{1, 3, 2}));
  EXPECT_EQ(canonical.to_double(), (std::vector<double>{0, 10, 1, 11, 2, 12}));
}

}  // namespace
}  // namespace attnscope::testing
