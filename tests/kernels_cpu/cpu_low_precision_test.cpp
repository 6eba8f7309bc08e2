// fp16 / bf16 accuracy rule (DESIGN §3, as FlashAttention's own tests): against the fp64
// reference on the rounded inputs, max|fused - ref| <= 2 * max|unfused - ref| + 1e-6 for O
// and LSE, 3x for dQ, dK, dV; and both emulations really are rounded to the precision.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/precision.h"

namespace attnscope::test {
namespace {

std::vector<CaseConfig> grid() {
  std::vector<CaseConfig> g;
  for (Precision p : {Precision::f16, Precision::bf16}) {
    const std::string suffix = p == Precision::f16 ? "_f16" : "_bf16";
    CaseConfig c;
    c.precision = p;
    c.name = "plain_d64_sq128_sk128" + suffix;
    c.sq = c.sk = 128;
    c.d = 64;
    g.push_back(c);
    c = CaseConfig{};
    c.precision = p;
    c.name = "causal_br_d59_sq17_sk97" + suffix;
    c.sq = 17;
    c.sk = 97;
    c.d = 59;
    c.causal = true;
    c.align = CausalAlign::bottom_right;
    g.push_back(c);
    c = CaseConfig{};
    c.precision = p;
    c.name = "gqa_h4_hk2_key_padding_d32_sq97_sk128" + suffix;
    c.heads = 4;
    c.kv_heads = 2;
    c.sq = 97;
    c.sk = 128;
    c.d = 32;
    c.mask = MaskKind::key_padding;
    g.push_back(c);
    c = CaseConfig{};
    c.precision = p;
    c.name = "bias_softcap_d111_dv16_sq97_sk97" + suffix;
    c.sq = c.sk = 97;
    c.d = 111;
    c.dv = 16;
    c.bias = true;
    c.softcap = 2.0;
    g.push_back(c);
    c = CaseConfig{};
    c.precision = p;
    c.name = "causal_tl_d16_sq1025_sk1025" + suffix;
    c.sq = c.sk = 1025;
    c.d = 16;
    c.causal = true;
    g.push_back(c);
  }
  return g;
}

class LowPrecisionRule : public ::testing::TestWithParam<CaseConfig> {};

void expect_rule(const char* what, double factor, const std::vector<float>& fused,
                 const std::vector<float>& unfused, const std::vector<double>& ref) {
  EXPECT_EQ(count_nonfinite(fused), 0) << what;
  const double fused_err = max_abs_diff(fused, ref);
  const double unfused_err = max_abs_diff(unfused, ref);
  EXPECT_LE(fused_err, factor * unfused_err + 1e-6)
      << what << ": fused error " << fused_err << ", unfused error " << unfused_err;
}

void expect_representable(const char* what, Precision p, const std::vector<float>& x) {
  int64_t off = 0;
  for (float e : x) off += round_to(p, e) != e && e == e;
  EXPECT_EQ(off, 0) << what << " holds values not representable in the precision";
}

TEST_P(LowPrecisionRule, fused_within_2x_unfused_error_3x_for_gradients) {
  const TestCase c = make_case(GetParam());
  const ReferenceTrace ref = run_reference(c);
  const CpuAttnResult fused = run_cpu(c, Mode::fused);
  const CpuAttnResult unfused = run_cpu(c, Mode::unfused);
  expect_rule("o", 2, fused.o, unfused.o, ref.o);
  expect_rule("lse", 2, fused.lse, unfused.lse, ref.lse);
  expect_rule("dq", 3, fused.dq, unfused.dq, ref.dq);
  expect_rule("dk", 3, fused.dk, unfused.dk, ref.dk);
  expect_rule("dv", 3, fused.dv, unfused.dv, ref.dv);
  const Precision p = GetParam().precision;
  for (const CpuAttnResult* r : {&fused, &unfused}) {
    expect_representable("o", p, r->o);
    expect_representable("dq", p, r->dq);
    expect_representable("dk", p, r->dk);
    expect_representable("dv", p, r->dv);
  }
  expect_representable("unfused lse", p, unfused.lse);
}

INSTANTIATE_TEST_SUITE_P(Grid, LowPrecisionRule, ::testing::ValuesIn(grid()),
                         [](const ::testing::TestParamInfo<CaseConfig>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace attnscope::test
