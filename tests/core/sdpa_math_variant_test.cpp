// torch-sdpa-math against PyTorch's public SDPA entry under its MATH backend (an independent
// LibTorch computation: SDPA converts the bool mask, applies is_causal and GQA itself) on the
// harness shapes at every precision, and cpu-upcast (the own kernel's emulation of SDPA MATH on
// CPU) against torch-sdpa-math on a case of large scores.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "core/kernel_registry.h"
#include "core/torch_reference.h"
#include "variant_harness_util.h"

namespace attnscope::test {
namespace {

std::vector<HarnessCase> cases() {
  std::vector<HarnessCase> out;
  for (Precision p : {Precision::f64, Precision::f32, Precision::f16, Precision::bf16}) {
    for (const HarnessCase& c : harness_shapes()) {
      if (c.softcap == 0) out.push_back(at_precision(c, p));  // SDPA has no softcap
    }
  }
  return out;
}

// Both entries end in the same ATen op on the same tensors: equal bit for bit (NaN where NaN).
void expect_same(const char* what, const std::vector<double>& got,
                 const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t differ = 0, first = -1;
  for (size_t e = 0; e < want.size(); ++e) {
    const bool same = std::isnan(want[e]) ? std::isnan(got[e]) : got[e] == want[e];
    if (!same && differ++ == 0) first = static_cast<int64_t>(e);
  }
  EXPECT_EQ(differ, 0) << what << ": first at " << first << ", max|diff| "
                       << max_abs_error(got, want);
}

class TorchSdpaMathVsPublicSdpa : public ::testing::TestWithParam<HarnessCase> {};

TEST_P(TorchSdpaMathVsPublicSdpa, equals_sdpa_under_math_backend) {
  const HarnessCase& c = GetParam();
  const std::unique_ptr<HarnessInputs> in = make_inputs(c);
  const Result<VariantOutputs> got = run_variant(*find_variant("torch-sdpa-math"), in->params,
                                                 {c.precision, Mode::fused, 2}, in->view());
  ASSERT_TRUE(got.ok()) << got.error().describe();
  const TorchReference want = torch_sdpa_math_public(in->params, c.precision, in->q.data(),
                                                     in->k.data(), in->v.data(), in->dout.data());
  expect_same("o", got->o, want.o);
  expect_same("dq", got->dq, want.dq);
  expect_same("dk", got->dk, want.dk);
  expect_same("dv", got->dv, want.dv);
}

INSTANTIATE_TEST_SUITE_P(Shapes, TorchSdpaMathVsPublicSdpa, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<HarnessCase>& info) {
                           return info.param.name;
                         });

// Every third query row of a bool-masked case attends to nothing: SDPA MATH's _safe_softmax
// gives O = 0 and zero gradients there, in both entries.
TEST(TorchSdpaMath, fully_masked_rows_give_zero_like_public_sdpa_f16) {
  HarnessCase c;
  c.name = "empty_rows_d32_sq17_sk33";
  c.heads = 2;
  c.kv_heads = 1;
  c.sq = 17;
  c.sk = 33;
  c.d = 32;
  c.mask = HarnessMask::full;
  c = at_precision(c, Precision::f16);
  std::unique_ptr<HarnessInputs> in = make_inputs(c);
  for (int64_t r = 0; r < c.heads * c.sq; r += 3) {
    std::fill_n(in->mask.begin() + r * c.sk, c.sk, uint8_t{0});
  }
  in->params.mask_fill = MaskFill::safe;
  const Result<VariantOutputs> got = run_variant(*find_variant("torch-sdpa-math"), in->params,
                                                 {c.precision, Mode::fused, 2}, in->view());
  ASSERT_TRUE(got.ok()) << got.error().describe();
  const TorchReference want = torch_sdpa_math_public(in->params, c.precision, in->q.data(),
                                                     in->k.data(), in->v.data(), in->dout.data());
  expect_same("o", got->o, want.o);
  expect_same("dq", got->dq, want.dq);
  for (int64_t r = 0; r < c.heads * c.sq; r += 3) {
    EXPECT_EQ(got->lse[r], -std::numeric_limits<double>::infinity()) << r;
    for (int64_t e = 0; e < c.d; ++e) {
      EXPECT_EQ(got->o[r * c.d + e], 0.0) << r;
      EXPECT_EQ(got->dq[r * c.d + e], 0.0) << r;
    }
  }
}

// q and k times 4 (exact in fp16 / bf16): |S| reaches ~50, where rounding P to the precision
// before P V (the fused kernel) costs more than SDPA MATH's fp32 softmax.
std::unique_ptr<HarnessInputs> large_scores(Precision p) {
  HarnessCase c;
  c.name = "large_scores_d64_s97";
  c.heads = 2;
  c.kv_heads = 2;
  c.sq = 97;
  c.sk = 97;
  c.d = 64;
  std::unique_ptr<HarnessInputs> in = make_inputs(at_precision(c, p));
  for (double& x : in->q) x *= 4;
  for (double& x : in->k) x *= 4;
  return in;
}

Result<VariantOutputs> run(const std::string& name, const HarnessInputs& in, Precision p) {
  const KernelVariant& v = *find_variant(name);
  const Mode mode = v.modes.empty() ? Mode::fused : v.modes.front();
  return run_variant(v, in.params, {v.precisions.size() == 1 ? v.precisions.front() : p, mode, 2},
                     in.view());
}

class CpuUpcastVsTorchSdpaMath : public ::testing::TestWithParam<Precision> {};

// Sum of |a - b| (both finite here): "closer" in aggregate, where max errors of one unit of
// the precision tie.
double l1_distance(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t e = 0; e < a.size() && e < b.size(); ++e) sum += std::abs(a[e] - b[e]);
  return sum;
}

// The accuracy rule with torch-sdpa-math as the target: max|cpu-upcast - sdpa| <= 2x (3x for
// gradients) max|cpu-unfused - fp64| + the fp32 floor; and cpu-upcast is closer to SDPA MATH
// than cpu-fused on every output (sum of |differences|).
TEST_P(CpuUpcastVsTorchSdpaMath, within_accuracy_rule_and_closer_than_cpu_fused_large_scores) {
  const Precision p = GetParam();
  const std::unique_ptr<HarnessInputs> in = large_scores(p);
  const Result<VariantOutputs> sdpa = run("torch-sdpa-math", *in, p);
  const Result<VariantOutputs> upcast = run("cpu-upcast", *in, p);
  const Result<VariantOutputs> fused = run("cpu-fused", *in, p);
  const Result<VariantOutputs> unfused = run("cpu-unfused", *in, p);
  const Result<VariantOutputs> ref = run("reference", *in, p);
  for (const Result<VariantOutputs>* r : {&sdpa, &upcast, &fused, &unfused, &ref}) {
    ASSERT_TRUE(r->ok()) << r->error().describe();
  }
  const auto check = [&](const char* what, double factor, const std::vector<double>& s,
                         const std::vector<double>& u, const std::vector<double>& f,
                         const std::vector<double>& base, const std::vector<double>& r) {
    const double err_upcast = max_abs_error(u, s), bound = accuracy_bound(p, factor, r, base);
    const double l1_upcast = l1_distance(u, s), l1_fused = l1_distance(f, s);
    char text[128];
    std::snprintf(text, sizeof text, "max %.3e <= %.3e; sum|diff| upcast %.3e, fused %.3e",
                  err_upcast, bound, l1_upcast, l1_fused);
    RecordProperty(std::string("vs_sdpa_") + what, text);
    EXPECT_LE(err_upcast, bound) << what << ": " << text;
    EXPECT_LT(l1_upcast, l1_fused) << what << ": " << text;
  };
  check("o", 2, sdpa->o, upcast->o, fused->o, unfused->o, ref->o);
  check("dq", 3, sdpa->dq, upcast->dq, fused->dq, unfused->dq, ref->dq);
  check("dk", 3, sdpa->dk, upcast->dk, fused->dk, unfused->dk, ref->dk);
  check("dv", 3, sdpa->dv, upcast->dv, fused->dv, unfused->dv, ref->dv);
}

INSTANTIATE_TEST_SUITE_P(LowPrecision, CpuUpcastVsTorchSdpaMath,
                         ::testing::Values(Precision::f16, Precision::bf16),
                         [](const ::testing::TestParamInfo<Precision>& info) {
                           return std::string(info.param == Precision::f16 ? "f16" : "bf16");
                         });

}  // namespace
}  // namespace attnscope::test
