// Exact pathologies: fully masked rows under each fill policy, a -1e9 fill that becomes -inf
// in unfused fp16, Q K^T overflowing fp16's 65504, and NaN inputs hidden by masks. The CPU
// kernels must put NaN/Inf exactly where the fp64 reference does (or where the emulated
// precision creates them) and nowhere else.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cpu_test_util.h"

namespace attnscope::test {
namespace {

constexpr int64_t kRow = kMaskedRow;

void expect_same_nonfinite(const CpuAttnResult& got, const ReferenceTrace& ref) {
  EXPECT_EQ(nonfinite_mismatches(got.o, ref.o), 0) << "o";
  EXPECT_EQ(nonfinite_mismatches(got.lse, ref.lse), 0) << "lse";
  EXPECT_EQ(nonfinite_mismatches(got.m, ref.m), 0) << "m";
  EXPECT_EQ(nonfinite_mismatches(got.l, ref.l), 0) << "l";
  EXPECT_EQ(nonfinite_mismatches(got.d, ref.d), 0) << "d";
  EXPECT_EQ(nonfinite_mismatches(got.dq, ref.dq), 0) << "dq";
  EXPECT_EQ(nonfinite_mismatches(got.dk, ref.dk), 0) << "dk";
  EXPECT_EQ(nonfinite_mismatches(got.dv, ref.dv), 0) << "dv";
}

// Row r of O [Sq, Dv].
std::vector<float> o_row(const CpuAttnResult& r, int64_t dv, int64_t row) {
  return {r.o.begin() + row * dv, r.o.begin() + (row + 1) * dv};
}

// Mean of V over all keys, column c (batch 0, kv head 0).
double v_mean(const TestCase& t, int64_t c) {
  double sum = 0;
  for (int64_t j = 0; j < t.config.sk; ++j) sum += t.v[static_cast<size_t>(j * t.config.dv + c)];
  return sum / static_cast<double>(t.config.sk);
}

void expect_uniform_row(const TestCase& t, const CpuAttnResult& r, double tol) {
  const std::vector<float> row = o_row(r, t.config.dv, kRow);
  for (int64_t c = 0; c < t.config.dv; ++c) EXPECT_NEAR(row[c], v_mean(t, c), tol) << "col " << c;
}

TEST(FullyMaskedRow, neg_inf_fill_gives_nan_row_and_nan_grads_like_reference_f32_f16) {
  for (Precision p : {Precision::f32, Precision::f16}) {
    const TestCase t = fully_masked_row_case(MaskFill::neg_inf, p);
    const ReferenceTrace ref = run_reference(t);
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      const CpuAttnResult r = run_cpu(t, mode);
      expect_same_nonfinite(r, ref);
      EXPECT_TRUE(std::isnan(r.lse[kRow]));
      EXPECT_EQ(r.m[kRow], -std::numeric_limits<float>::infinity());
      for (float x : o_row(r, t.config.dv, kRow)) EXPECT_TRUE(std::isnan(x));
      EXPECT_EQ(count_nonfinite(r.o), t.config.dv);                         // only that row
      EXPECT_EQ(count_nonfinite(r.dk), static_cast<int64_t>(r.dk.size()));  // P row NaN
    }
  }
}

TEST(FullyMaskedRow, neg_1e9_fill_gives_uniform_row_matching_reference_f32) {
  const TestCase t = fully_masked_row_case(MaskFill::neg_1e9, Precision::f32);
  const ReferenceTrace ref = run_reference(t);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    const CpuAttnResult r = run_cpu(t, mode);
    expect_same_nonfinite(r, ref);
    EXPECT_EQ(count_nonfinite(r.o) + count_nonfinite(r.dq) + count_nonfinite(r.dk), 0);
    expect_uniform_row(t, r, 1e-6);
    EXPECT_LE(max_abs_diff(r.dv, ref.dv), 1e-5 * max_abs(ref.dv));
    EXPECT_LE(max_abs_diff(r.dq, ref.dq), 1e-5 * max_abs(ref.dq));
  }
}

TEST(FullyMaskedRow, finfo_min_fill_is_minus_65504_and_uniform_in_f16_fused_and_unfused) {
  const TestCase t = fully_masked_row_case(MaskFill::finfo_min, Precision::f16);
  const ReferenceTrace ref = run_reference(t);
  EXPECT_EQ(ref.m[kRow], -65504.0);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    const CpuAttnResult r = run_cpu(t, mode);
    expect_same_nonfinite(r, ref);
    EXPECT_EQ(r.m[kRow], -65504.0f);
    EXPECT_EQ(count_nonfinite(r.o) + count_nonfinite(r.dk) + count_nonfinite(r.dv), 0);
    expect_uniform_row(t, r, 2e-3);
  }
}

TEST(FullyMaskedRow, safe_fill_gives_zero_output_lse_neg_inf_and_zero_grads_f32_bf16) {
  for (Precision p : {Precision::f32, Precision::bf16}) {
    const TestCase t = fully_masked_row_case(MaskFill::safe, p);
    const ReferenceTrace ref = run_reference(t);
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      const CpuAttnResult r = run_cpu(t, mode);
      expect_same_nonfinite(r, ref);
      EXPECT_EQ(r.lse[kRow], -std::numeric_limits<float>::infinity());
      EXPECT_EQ(r.l[kRow], 0.0f);
      EXPECT_EQ(r.d[kRow], 0.0f);
      for (float x : o_row(r, t.config.dv, kRow)) EXPECT_EQ(x, 0.0f);
      for (int64_t c = 0; c < t.config.d; ++c) EXPECT_EQ(r.dq[kRow * t.config.d + c], 0.0f);
      EXPECT_EQ(count_nonfinite(r.o) + count_nonfinite(r.dq) + count_nonfinite(r.dk) +
                    count_nonfinite(r.dv),
                0);
    }
  }
}

TEST(FullyMaskedRow, all_neg_inf_bias_row_behaves_as_a_masked_row) {
  CaseConfig c;
  c.sq = 17;
  c.sk = 97;
  c.d = 16;
  c.bias = true;
  for (MaskFill fill : {MaskFill::neg_inf, MaskFill::safe}) {
    c.fill = fill;
    TestCase t = make_case(c);
    for (int64_t j = 0; j < c.sk; ++j) {
      t.bias[static_cast<size_t>(kRow * c.sk + j)] = -std::numeric_limits<double>::infinity();
    }
    const ReferenceTrace ref = run_reference(t);
    const CpuAttnResult r = run_cpu(t, Mode::fused);
    expect_same_nonfinite(r, ref);
    EXPECT_EQ(count_nonfinite(r.o), fill == MaskFill::safe ? 0 : c.d);
  }
}

TEST(MaskFillOverflow, neg_1e9_becomes_neg_inf_in_unfused_f16_nan_row_finite_in_fused_f16) {
  const TestCase t = fully_masked_row_case(MaskFill::neg_1e9, Precision::f16);
  const CpuAttnResult unfused = run_cpu(t, Mode::unfused);
  for (float x : o_row(unfused, t.config.dv, kRow)) EXPECT_TRUE(std::isnan(x));
  EXPECT_EQ(unfused.m[kRow], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(unfused.lse[kRow]));

  const CpuAttnResult fused = run_cpu(t, Mode::fused);
  EXPECT_EQ(fused.m[kRow], -1e9f);  // the fill stays fp32 in registers
  EXPECT_EQ(count_nonfinite(fused.o) + count_nonfinite(fused.dq) + count_nonfinite(fused.dk) +
                count_nonfinite(fused.dv),
            0);
  expect_uniform_row(t, fused, 2e-3);
}

TEST(MaskFillOverflow, neg_1e9_stays_finite_in_unfused_bf16) {
  const TestCase t = fully_masked_row_case(MaskFill::neg_1e9, Precision::bf16);
  const CpuAttnResult unfused = run_cpu(t, Mode::unfused);
  EXPECT_EQ(count_nonfinite(unfused.o) + count_nonfinite(unfused.dk), 0);
  expect_uniform_row(t, unfused, 2e-2);
}

TEST(ScoreOverflow, qk_above_65504_is_inf_then_nan_in_unfused_f16_finite_in_fused_f16) {
  const TestCase t = qk_overflow_case(Precision::f16);
  const CpuAttnResult unfused = run_cpu(t, Mode::unfused);
  EXPECT_EQ(unfused.m[0], std::numeric_limits<float>::infinity());
  for (float x : o_row(unfused, t.config.dv, 0)) EXPECT_TRUE(std::isnan(x));
  EXPECT_EQ(count_nonfinite(unfused.o), t.config.dv);

  const CpuAttnResult fused = run_cpu(t, Mode::fused);
  EXPECT_EQ(fused.m[0], 12800.0f);
  EXPECT_EQ(count_nonfinite(fused.o) + count_nonfinite(fused.dq) + count_nonfinite(fused.dk) +
                count_nonfinite(fused.dv),
            0);
  // The row is one-hot on key 0: O_0 = V_0.
  for (int64_t c = 0; c < t.config.dv; ++c) EXPECT_EQ(fused.o[c], t.v[c]);
}

TEST(ScoreOverflow, qk_above_65504_stays_finite_in_unfused_bf16) {
  const TestCase t = qk_overflow_case(Precision::bf16);
  const CpuAttnResult unfused = run_cpu(t, Mode::unfused);
  EXPECT_EQ(unfused.m[0], 12800.0f);
  EXPECT_EQ(count_nonfinite(unfused.o) + count_nonfinite(unfused.dq) + count_nonfinite(unfused.dk) +
                count_nonfinite(unfused.dv),
            0);
  for (int64_t c = 0; c < t.config.dv; ++c) EXPECT_EQ(unfused.o[c], t.v[c]);
}

// Sq = Sk = 200 causal (several kv tiles hidden from the first q tiles).
TestCase causal_case() {
  CaseConfig c;
  c.sq = c.sk = 200;
  c.d = 16;
  c.causal = true;
  return make_case(c);
}

TEST(NanInput, nan_in_causally_hidden_value_poisons_every_row_like_reference) {
  TestCase t = causal_case();
  t.v[static_cast<size_t>(150 * t.config.dv)] = std::numeric_limits<float>::quiet_NaN();
  const ReferenceTrace ref = run_reference(t);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    const CpuAttnResult r = run_cpu(t, mode);
    expect_same_nonfinite(r, ref);
    EXPECT_TRUE(std::isnan(r.o[0]));  // row 0 never sees key 150, yet 0 * NaN = NaN
  }
}

TEST(NanInput, nan_in_query_and_key_nonfinite_pattern_matches_reference) {
  TestCase t = causal_case();
  t.q[static_cast<size_t>(5 * t.config.d + 3)] = std::numeric_limits<float>::quiet_NaN();
  t.k[static_cast<size_t>(170 * t.config.d)] = std::numeric_limits<float>::infinity();
  const ReferenceTrace ref = run_reference(t);
  for (Mode mode : {Mode::fused, Mode::unfused}) expect_same_nonfinite(run_cpu(t, mode), ref);
}

}  // namespace
}  // namespace attnscope::test
