// Pins the backend matrix (reference exact, cpu-fused fp32 within 1e-5, unfused fp16 overflow
// non-finite while fused fp16 stays finite, unsupported rows with reasons) and the scale sweep
// (threshold of a crafted overflow found by bisection, safe ranges).
#include <gtest/gtest.h>

#include <cmath>

#include "analysis_test_util.h"
#include "core/analysis/backend_matrix.h"
#include "core/analysis/scale_sweep.h"

namespace attnscope::testing {
namespace {

const MatrixRow* row(const BackendMatrix& m, const std::string& variant, Precision p) {
  for (const MatrixRow& r : m.rows) {
    if (r.variant == variant && r.precision == p) return &r;
  }
  return nullptr;
}

const TensorAccuracy* tensor(const MatrixRow& r, const std::string& name) {
  for (const TensorAccuracy& t : r.tensors) {
    if (t.tensor == name) return &t;
  }
  return nullptr;
}

TEST(BackendMatrix, reference_exact_and_cpu_fused_fp32_within_1e_5) {
  const Result<BackendMatrix> m = backend_matrix(make_case(spec(2, 1, "float32")), {});
  ASSERT_TRUE(m.ok());
  const MatrixRow* ref = row(*m, "reference", Precision::f64);
  ASSERT_NE(ref, nullptr);
  ASSERT_TRUE(ref->ran) << ref->error;
  for (const TensorAccuracy& t : ref->tensors) EXPECT_EQ(t.stats.max_error, 0.0) << t.tensor;
  const MatrixRow* fused = row(*m, "cpu-fused", Precision::f32);
  ASSERT_NE(fused, nullptr);
  EXPECT_TRUE(fused->finite && fused->within_rule);
  for (const TensorAccuracy& t : fused->tensors) {
    EXPECT_LE(t.stats.max_error, 1e-5 * std::max(1.0, t.stats.max_abs_ref)) << t.tensor;
    EXPECT_GT(t.stats.cosine, 0.999999) << t.tensor;
  }
  const MatrixRow* math = row(*m, "torch-eager", Precision::f64);
  ASSERT_NE(math, nullptr);
  EXPECT_TRUE(math->ran && math->within_rule) << math->error;
}

TEST(BackendMatrix, unsupported_combinations_are_listed_with_their_reason) {
  const Result<BackendMatrix> m = backend_matrix(make_case({}), {});
  ASSERT_TRUE(m.ok());
  const MatrixRow* r = row(*m, "cpu-fused", Precision::f64);
  ASSERT_NE(r, nullptr);
  EXPECT_FALSE(r->supported);
  EXPECT_FALSE(r->ran);
  EXPECT_NE(r->reason.find("not fp64"), std::string::npos) << r->reason;
}

TEST(BackendMatrix, fp16_overflow_case_is_nonfinite_unfused_and_finite_fused) {
  // q.k = 300 * 300 = 9e4 > 65504 in head dim 0 of every row.
  CaseData c = make_case(spec(1, 1));
  std::vector<double> q = values(c, "q"), k = values(c, "k");
  for (size_t i = 0; i < 16; ++i) q[i * 8] = k[i * 8] = 300;
  put(c, "q", DType::f16, {1, 1, 16, 8}, q);
  put(c, "k", DType::f16, {1, 1, 16, 8}, k);
  const Result<BackendMatrix> m = backend_matrix(c, {});
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(row(*m, "cpu-unfused", Precision::f16)->finite);
  EXPECT_FALSE(row(*m, "torch-eager", Precision::f16)->finite);
  EXPECT_TRUE(row(*m, "cpu-fused", Precision::f16)->finite);
  EXPECT_TRUE(row(*m, "cpu-fused", Precision::bf16)->finite);
  const TensorAccuracy* o = tensor(*row(*m, "cpu-unfused", Precision::f16), "o");
  ASSERT_NE(o, nullptr);
  EXPECT_GT(o->stats.nonfinite, 0);
}

// Head dim 0 of every q and k holds 100: max q.k = 1e4 + O(1), so unfused fp16 overflows once
// scale * q.k > 65504, near scale 6.5; the fused kernel never does.
CaseData sweep_case() {
  CaseData c = make_case(spec(1, 1));
  std::vector<double> q = values(c, "q"), k = values(c, "k");
  for (size_t i = 0; i < 16; ++i) q[i * 8] = k[i * 8] = 100;
  put(c, "q", DType::f16, {1, 1, 16, 8}, q);
  put(c, "k", DType::f16, {1, 1, 16, 8}, k);
  return c;
}

TEST(ScaleSweep, finds_the_fp16_unfused_overflow_threshold_by_bisection) {
  SweepSettings s;
  s.scale_min = 0.01;
  s.scale_max = 100;
  s.points = 9;
  s.precisions = {Precision::f16};
  const Result<ScaleSweep> sweep = scale_sweep(sweep_case(), s);
  ASSERT_TRUE(sweep.ok());
  ASSERT_EQ(sweep->scales.size(), 9u);
  ASSERT_EQ(sweep->points.size(), 18u);
  ASSERT_EQ(sweep->ranges.size(), 2u);
  const SafeRange& fused = sweep->ranges[0];
  const SafeRange& unfused = sweep->ranges[1];
  EXPECT_EQ(fused.mode, Mode::fused);
  EXPECT_FALSE(fused.threshold.has_value());
  EXPECT_DOUBLE_EQ(fused.high, 100);
  ASSERT_TRUE(unfused.threshold.has_value());
  double max_qk = 0;
  const std::vector<double> q = values(sweep_case(), "q"), k = values(sweep_case(), "k");
  for (size_t i = 0; i < 16; ++i) {
    for (size_t j = 0; j < 16; ++j) {
      double dot = 0;
      for (size_t d = 0; d < 8; ++d) dot += q[i * 8 + d] * k[j * 8 + d];
      max_qk = std::max(max_qk, std::fabs(dot));
    }
  }
  EXPECT_NEAR(*unfused.threshold, 65504 / max_qk, 0.02 * 65504 / max_qk);
  EXPECT_DOUBLE_EQ(unfused.low, 0.01);
  EXPECT_LT(unfused.high, *unfused.threshold);
  EXPECT_TRUE(unfused.case_scale_finite);
  const SweepPoint& last_fused = sweep->points[16];  // scale 100: fp32 scores beyond 65504
  EXPECT_EQ(last_fused.mode, Mode::fused);
  EXPECT_TRUE(last_fused.finite());
  EXPECT_GT(last_fused.max_abs_s, 65504);
  EXPECT_FALSE(sweep->points[17].finite());
}

TEST(ScaleSweep, cancel_inside_a_run_stops_its_kernels_and_keeps_no_partial_point) {
  SweepSettings s;
  s.points = 4;
  s.precisions = {Precision::f16};
  s.threads = 1;
  int polls = 0;
  // Poll 1 is the check before the first run; poll 2 comes from inside its kernels (they poll
  // before every tile), poll 3 is the sweep's final check. Were the kernels deaf to it, the
  // first run would finish and count.
  s.cancelled = [&polls] { return ++polls >= 2; };
  const Result<ScaleSweep> sweep = scale_sweep(sweep_case(), s);
  ASSERT_TRUE(sweep.ok());
  EXPECT_TRUE(sweep->interrupted);
  EXPECT_TRUE(sweep->points.empty());
  EXPECT_TRUE(sweep->ranges.empty());
  EXPECT_EQ(polls, 3);
}

TEST(ScaleSweep, invalid_range_is_an_error) {
  SweepSettings s;
  s.scale_min = 1;
  s.scale_max = 0.5;
  EXPECT_FALSE(scale_sweep(sweep_case(), s).ok());
}

}  // namespace
}  // namespace attnscope::testing
