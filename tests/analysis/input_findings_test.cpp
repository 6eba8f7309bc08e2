// Pins nonfinite_input, masked_nan_leak and mask_fill_overflow on crafted cases, and that
// intentional -inf masking is never reported as an overflow or a bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "analysis_test_util.h"

namespace attnscope::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Index of element (b, h, s, d) in a [B, H, S, D] tensor.
size_t at4(int64_t H, int64_t S, int64_t D, int64_t b, int64_t h, int64_t s, int64_t d) {
  return static_cast<size_t>(((b * H + h) * S + s) * D + d);
}

// `c` (two kv heads of 16 keys, D = 8) with a NaN in v of batch 0, kv head 1, key 5.
CaseData with_nan_in_v(CaseData c) {
  std::vector<double> v = values(c, "v");
  v[at4(2, 16, 8, 0, 1, 5, 2)] = std::nan("");
  put(c, "v", DType::f16, {1, 2, 16, 8}, v);
  return c;
}

TEST(InputFindings, nan_in_v_is_error_located_at_kv_head_and_key) {
  const CaseAnalysis a = analyze(with_nan_in_v(make_case({})));
  const auto found = of_kind(a, FindingKind::nonfinite_input);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->severity, Severity::error);
  EXPECT_EQ(found[0]->tensor, "v");
  EXPECT_EQ(found[0]->batch, 0);
  EXPECT_EQ(found[0]->head, 1);
  EXPECT_EQ(found[0]->rows.first, 5);
  EXPECT_EQ(found[0]->rows.last, 5);
  EXPECT_NE(found[0]->message.find("1 NaN"), std::string::npos) << found[0]->message;
  EXPECT_NE(found[0]->remedy.find("clipping cannot help"), std::string::npos);
}

// The same NaN in row 3 of q in both heads: one finding over heads 0-1 whose counts say they
// are per head and give the total.
TEST(InputFindings, nan_counts_grouped_over_heads_say_per_head_and_total) {
  CaseData c = make_case({});
  std::vector<double> q = values(c, "q");
  for (int64_t h = 0; h < 2; ++h) {
    for (int64_t d = 0; d < 4; ++d) q[at4(2, 16, 8, 0, h, 3, d)] = std::nan("");
  }
  put(c, "q", DType::f16, {1, 2, 16, 8}, q);
  const CaseAnalysis a = analyze(c);
  const auto found = of_kind(a, FindingKind::nonfinite_input);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->count, 8);
  EXPECT_NE(
      found[0]->message.find("q holds 4 NaN, 0 inf per head (8 in all) in batch 0, heads 0-1"),
      std::string::npos)
      << found[0]->message;
}

// GQA, 4 query heads on 2 kv heads: a NaN in v of kv head 1 names the query heads it feeds.
TEST(InputFindings, kv_head_finding_names_its_query_heads) {
  const CaseAnalysis a = analyze(with_nan_in_v(make_case(spec(4, 2))));
  const auto found = of_kind(a, FindingKind::nonfinite_input);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_NE(found[0]->message.find("kv head 1 (query heads 2-3)"), std::string::npos)
      << found[0]->message;
}

TEST(InputFindings, fp32_value_beyond_fp16_max_counts_as_input_overflow_when_run_in_fp16) {
  CaseData c = make_case(spec(2, 2, "float32"));
  std::vector<double> q = values(c, "q");
  q[3] = 1e5;
  put(c, "q", DType::f32, {1, 2, 16, 8}, q);
  AnalysisSettings s;
  s.run.precision = Precision::f16;
  const CaseAnalysis a = analyze(c, s);
  const auto found = of_kind(a, FindingKind::nonfinite_input);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_NE(found[0]->message.find("beyond fp16 max 65504"), std::string::npos)
      << found[0]->message;
  EXPECT_TRUE(of_kind(analyze(c), FindingKind::nonfinite_input).empty()) << "finite in fp32";
}

TEST(InputFindings, nan_value_at_masked_key_leaks_into_rows_that_cannot_see_it) {
  CaseData c = make_case(spec(1, 1));
  std::vector<double> mask(16, 1.0);
  mask[3] = 0;  // key 3 hidden from every query
  put(c, "mask", DType::boolean, {1, 1, 1, 16}, mask);
  std::vector<double> v = values(c, "v");
  v[at4(1, 16, 8, 0, 0, 3, 0)] = std::nan("");
  put(c, "v", DType::f16, {1, 1, 16, 8}, v);
  const CaseAnalysis a = analyze(c);
  const auto leak = of_kind(a, FindingKind::masked_nan_leak);
  ASSERT_EQ(leak.size(), 1u) << summary(a);
  EXPECT_EQ(leak[0]->severity, Severity::error);
  EXPECT_EQ(leak[0]->tensor, "v");
  EXPECT_EQ(leak[0]->cols.first, 3);
  EXPECT_EQ(leak[0]->rows.first, 0);
  EXPECT_EQ(leak[0]->rows.last, 15);
  EXPECT_EQ(leak[0]->modes, (std::vector<std::string>{"fused", "unfused"}));
  EXPECT_TRUE(has_kind(a, FindingKind::nonfinite_input));
}

TEST(InputFindings, finite_bias_sentinel_that_rounds_to_neg_inf_in_fp16_is_mask_fill_overflow) {
  CaseData c = make_case(spec(1, 1));
  std::vector<double> bias(16 * 16, 0.0);
  for (int64_t i = 0; i < 16; ++i) bias[static_cast<size_t>(i * 16 + 15)] = -1e9;  // padding key
  put(c, "bias", DType::f32, {1, 1, 16, 16}, bias);
  const CaseAnalysis a = analyze(c);
  const auto found = of_kind(a, FindingKind::mask_fill_overflow);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->severity, Severity::warning) << "no row is emptied by it";
  EXPECT_EQ(found[0]->tensor, "bias");
  EXPECT_EQ(found[0]->count, 16);
  EXPECT_EQ(found[0]->cols.first, 15);
  EXPECT_NE(found[0]->message.find("-1e9"), std::string::npos) << found[0]->message;
  EXPECT_NE(found[0]->remedy.find("finfo"), std::string::npos);
  EXPECT_FALSE(has_kind(a, FindingKind::score_overflow)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::nonfinite_input)) << summary(a);
  CaseData bf16 = make_case(spec(1, 1, "bfloat16"));
  put(bf16, "bias", DType::f32, {1, 1, 16, 16}, bias);
  EXPECT_FALSE(has_kind(analyze(bf16), FindingKind::mask_fill_overflow)) << "-1e9 fits bf16";
}

TEST(InputFindings, bool_mask_fill_minus_1e9_overflows_only_in_unfused_fp16) {
  CaseData c = make_case(spec(1, 1));
  std::vector<double> mask(16 * 16, 1.0);
  for (int64_t j = 0; j < 16; ++j) mask[static_cast<size_t>(15 * 16 + j)] = 0;  // row 15 empty
  put(c, "mask", DType::boolean, {1, 1, 16, 16}, mask);
  AnalysisSettings s;
  s.run.mask_fill = MaskFill::neg_1e9;
  const CaseAnalysis a = analyze(c, s);
  const auto found = of_kind(a, FindingKind::mask_fill_overflow);
  ASSERT_EQ(found.size(), 1u) << summary(a);
  EXPECT_EQ(found[0]->severity, Severity::error) << "row 15 turns NaN instead of uniform";
  EXPECT_EQ(found[0]->modes, std::vector<std::string>{"unfused"});
  EXPECT_EQ(found[0]->count, 16);
  s.run.mask_fill = MaskFill::finfo_min;
  EXPECT_FALSE(has_kind(analyze(c, s), FindingKind::mask_fill_overflow));
}

TEST(InputFindings, intentional_neg_inf_masking_is_never_overflow_or_bad_input) {
  CaseData c = make_case(spec(2, 1));
  c.info.config.causal = true;
  std::vector<double> bias(16 * 16, 0.0);
  for (int64_t i = 0; i < 16; ++i) bias[static_cast<size_t>(i * 16)] = i > 0 ? -kInf : 0.0;
  put(c, "bias", DType::f32, {1, 1, 16, 16}, bias);
  std::vector<double> mask(16, 1.0);
  mask[7] = 0;
  put(c, "mask", DType::boolean, {1, 1, 1, 16}, mask);
  const CaseAnalysis a = analyze(c);
  EXPECT_TRUE(a.findings.empty()) << summary(a);
  for (const RunStats& r : a.stats.runs) EXPECT_EQ(r.o.nonfinite() + r.dq.nonfinite(), 0);
}

}  // namespace
}  // namespace attnscope::testing
