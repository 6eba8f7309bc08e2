// fp32 CPU kernels (fused and unfused) against the fp64 reference: relative max error
// <= 1e-5 on O, LSE, dQ, dK, dV and identical NaN/Inf positions, over a sampled grid of
// tile-breaking sequence lengths, head dims, causal alignments, GQA, masks, bias and softcap.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu_test_util.h"

namespace attnscope::test {
namespace {

struct AccuracyCase {
  CaseConfig config;
  Mode mode;
};

CaseConfig cfg(std::string name, int64_t sq, int64_t sk, int64_t d) {
  CaseConfig c;
  c.name = std::move(name);
  c.sq = sq;
  c.sk = sk;
  c.d = d;
  c.seed = static_cast<uint32_t>(sq * 131 + sk * 7 + d);
  return c;
}

std::vector<CaseConfig> grid() {
  std::vector<CaseConfig> g;
  g.push_back(cfg("plain_d16_sq1_sk1", 1, 1, 16));
  g.push_back(cfg("plain_d32_sq17_sk17", 17, 17, 32));
  g.push_back(cfg("plain_d59_sq97_sk128", 97, 128, 59));
  g.push_back(cfg("plain_d64_sq128_sk128", 128, 128, 64));
  g.push_back(cfg("plain_d111_sq17_sk97", 17, 97, 111));
  g.push_back(cfg("plain_d128_sq97_sk17", 97, 17, 128));
  g.push_back(cfg("plain_d16_sq1_sk1025", 1, 1025, 16));
  g.push_back(cfg("plain_d32_sq1025_sk97", 1025, 97, 32));
  CaseConfig c = cfg("causal_tl_d64_sq128_sk128", 128, 128, 64);
  c.causal = true;
  g.push_back(c);
  c = cfg("causal_tl_d59_sq97_sk17", 97, 17, 59);
  c.causal = true;
  g.push_back(c);
  c = cfg("causal_br_d59_sq17_sk97", 17, 97, 59);
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  g.push_back(c);
  c = cfg("causal_br_safe_d32_sq128_sk97", 128, 97, 32);
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.fill = MaskFill::safe;
  g.push_back(c);
  c = cfg("causal_br_neginf_d16_sq97_sk17", 97, 17, 16);
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  g.push_back(c);
  c = cfg("causal_tl_d16_sq1025_sk1025", 1025, 1025, 16);
  c.causal = true;
  g.push_back(c);
  c = cfg("causal_br_d16_sq1_sk1025", 1, 1025, 16);
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  g.push_back(c);
  c = cfg("gqa_h4_hk2_d64_sq97_sk128", 97, 128, 64);
  c.heads = 4;
  c.kv_heads = 2;
  g.push_back(c);
  c = cfg("mqa_h3_hk1_causal_d32_sq128_sk128", 128, 128, 32);
  c.heads = 3;
  c.causal = true;
  g.push_back(c);
  c = cfg("batch2_heads2_d59_sq17_sk97", 17, 97, 59);
  c.batch = 2;
  c.heads = 2;
  c.kv_heads = 2;
  g.push_back(c);
  c = cfg("mask_full_d64_sq97_sk97", 97, 97, 64);
  c.batch = 2;
  c.heads = 2;
  c.kv_heads = 2;
  c.mask = MaskKind::full;
  g.push_back(c);
  c = cfg("mask_broadcast_d32_sq128_sk97", 128, 97, 32);
  c.heads = 2;
  c.mask = MaskKind::broadcast;
  g.push_back(c);
  c = cfg("mask_key_padding_causal_d111_sq97_sk97", 97, 97, 111);
  c.batch = 2;
  c.mask = MaskKind::key_padding;
  c.causal = true;
  g.push_back(c);
  c = cfg("bias_d59_sq97_sk128", 97, 128, 59);
  c.heads = 2;
  c.bias = true;
  g.push_back(c);
  c = cfg("bias_neginf_d64_sq128_sk97", 128, 97, 64);
  c.bias = true;
  c.bias_neg_inf = true;
  g.push_back(c);
  c = cfg("softcap_d64_sq128_sk97", 128, 97, 64);
  c.softcap = 2.0;
  g.push_back(c);
  c = cfg("softcap_causal_br_d128_sq17_sk97", 17, 97, 128);
  c.softcap = 1.5;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  g.push_back(c);
  c = cfg("dv64_d32_sq97_sk97", 97, 97, 32);
  c.dv = 64;
  g.push_back(c);
  c = cfg("dv16_d128_sq17_sk128", 17, 128, 128);
  c.dv = 16;
  g.push_back(c);
  c = cfg("neg1e9_mask_full_d32_sq17_sk17", 17, 17, 32);
  c.mask = MaskKind::full;
  c.fill = MaskFill::neg_1e9;
  g.push_back(c);
  c = cfg("finfo_min_causal_br_d16_sq97_sk17", 97, 17, 16);
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.fill = MaskFill::finfo_min;
  g.push_back(c);
  c = cfg("everything_gqa_causal_mask_bias_softcap_d111_dv59_sq97_sk128", 97, 128, 111);
  c.heads = 4;
  c.kv_heads = 2;
  c.dv = 59;
  c.causal = true;
  c.mask = MaskKind::full;
  c.bias = true;
  c.bias_neg_inf = true;
  c.softcap = 3.0;
  c.fill = MaskFill::safe;
  g.push_back(c);
  return g;
}

std::vector<AccuracyCase> cases() {
  std::vector<AccuracyCase> all;
  for (const CaseConfig& c : grid()) {
    all.push_back({c, Mode::fused});
    all.push_back({c, Mode::unfused});
  }
  return all;
}

void PrintTo(const AccuracyCase& c, std::ostream* os) {
  *os << (c.mode == Mode::fused ? "fused " : "unfused ") << c.config.name;
}

class Fp32VsReference : public ::testing::TestWithParam<AccuracyCase> {};

void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& ref) {
  EXPECT_EQ(nonfinite_mismatches(got, ref), 0) << what << ": NaN/Inf positions differ";
  // Relative to max |ref|, floored at 0.01 for gradients that vanish exactly (Sk = 1 gives
  // dS = P (dP - D) = 0, which fp32 only reproduces to rounding).
  const double scale = std::max(max_abs(ref), 0.01);
  EXPECT_LE(max_abs_diff(got, ref) / scale, 1e-5) << what << ": max |ref| = " << scale;
}

TEST_P(Fp32VsReference, relative_max_error_below_1e5) {
  const TestCase c = make_case(GetParam().config);
  const ReferenceTrace ref = run_reference(c);
  const CpuAttnResult got = run_cpu(c, GetParam().mode);
  expect_close("o", got.o, ref.o);
  expect_close("lse", got.lse, ref.lse);
  expect_close("m", got.m, ref.m);
  expect_close("l", got.l, ref.l);
  expect_close("dq", got.dq, ref.dq);
  expect_close("dk", got.dk, ref.dk);
  expect_close("dv", got.dv, ref.dv);
}

INSTANTIATE_TEST_SUITE_P(Grid, Fp32VsReference, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<AccuracyCase>& info) {
                           const char* mode = info.param.mode == Mode::fused ? "fused" : "unfused";
                           return std::string(mode) + "_" + info.param.config.name + "_f32";
                         });

}  // namespace
}  // namespace attnscope::test
