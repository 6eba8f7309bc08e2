// CPU kernels with dropout from a known keep-mask (AttnParams::dropout_keep) against the fp64
// reference: fp32 relative max error <= 1e-5 and the accuracy rule of DESIGN §3 at fp16 / bf16
// on tile-breaking shapes, fused and unfused; bit-identical for any thread count; an all-kept
// mask with p = 0 changes no bit; a dropped NaN still poisons like the reference; bad dropout
// parameters are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/precision.h"

namespace attnscope::test {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

CaseConfig cfg(std::string name, int64_t sq, int64_t sk, int64_t d, double p) {
  CaseConfig c;
  c.name = std::move(name);
  c.sq = sq;
  c.sk = sk;
  c.d = d;
  c.dropout = true;
  c.dropout_p = p;
  c.seed = static_cast<uint32_t>(sq * 131 + sk * 7 + d + 5);
  return c;
}

std::vector<CaseConfig> f32_grid() {
  std::vector<CaseConfig> g;
  g.push_back(cfg("d16_sq1_sk1_p50", 1, 1, 16, 0.5));
  g.push_back(cfg("d59_sq17_sk97_p10", 17, 97, 59, 0.1));
  g.push_back(cfg("d64_sq128_sk128_p30", 128, 128, 64, 0.3));
  g.push_back(cfg("d59_sq1025_sk97_p10", 1025, 97, 59, 0.1));
  g.push_back(cfg("d16_sq1_sk1025_p30", 1, 1025, 16, 0.3));
  CaseConfig c = cfg("causal_tl_d16_sq128_sk128_p20", 128, 128, 16, 0.2);
  c.causal = true;
  g.push_back(c);
  c = cfg("causal_br_d64_sq97_sk128_p30", 97, 128, 64, 0.3);
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  g.push_back(c);
  c = cfg("causal_br_safe_d59_sq128_sk97_p30", 128, 97, 59, 0.3);
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.fill = MaskFill::safe;
  g.push_back(c);
  c = cfg("causal_tl_d16_sq1025_sk1025_p10", 1025, 1025, 16, 0.1);
  c.causal = true;
  g.push_back(c);
  c = cfg("gqa_h4_hk2_broadcast_keep_d64_sq97_sk17_p25", 97, 17, 64, 0.25);
  c.heads = 4;
  c.kv_heads = 2;
  c.dropout_broadcast = true;
  g.push_back(c);
  c = cfg("gqa_b2_h2_hk1_mask_bias_softcap_d59_sq97_sk97_p40", 97, 97, 59, 0.4);
  c.batch = 2;
  c.heads = 2;
  c.mask = MaskKind::key_padding;
  c.bias = true;
  c.bias_neg_inf = true;
  c.softcap = 3.0;
  g.push_back(c);
  return g;
}

struct ModeCase {
  CaseConfig config;
  Mode mode;
};

std::vector<ModeCase> f32_cases() {
  std::vector<ModeCase> all;
  for (const CaseConfig& c : f32_grid()) {
    all.push_back({c, Mode::fused});
    all.push_back({c, Mode::unfused});
  }
  return all;
}

void PrintTo(const ModeCase& c, std::ostream* os) {
  *os << (c.mode == Mode::fused ? "fused " : "unfused ") << c.config.name;
}

void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& ref) {
  EXPECT_EQ(nonfinite_mismatches(got, ref), 0) << what << ": NaN/Inf positions differ";
  const double scale = std::max(max_abs(ref), 0.01);
  EXPECT_LE(max_abs_diff(got, ref) / scale, 1e-5) << what << ": max |ref| = " << scale;
}

class DropoutF32VsReference : public ::testing::TestWithParam<ModeCase> {};

TEST_P(DropoutF32VsReference, relative_max_error_below_1e5) {
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

INSTANTIATE_TEST_SUITE_P(Grid, DropoutF32VsReference, ::testing::ValuesIn(f32_cases()),
                         [](const ::testing::TestParamInfo<ModeCase>& info) {
                           const char* mode = info.param.mode == Mode::fused ? "fused" : "unfused";
                           return std::string(mode) + "_dropout_" + info.param.config.name + "_f32";
                         });

std::vector<CaseConfig> low_precision_grid() {
  std::vector<CaseConfig> g;
  for (Precision p : {Precision::f16, Precision::bf16}) {
    const std::string suffix = p == Precision::f16 ? "_f16" : "_bf16";
    CaseConfig c = cfg("d59_s97_p10" + suffix, 97, 97, 59, 0.1);
    c.precision = p;
    g.push_back(c);
    c = cfg("causal_br_d64_sq17_sk128_p30" + suffix, 17, 128, 64, 0.3);
    c.causal = true;
    c.align = CausalAlign::bottom_right;
    c.precision = p;
    g.push_back(c);
    c = cfg("gqa_h4_hk2_broadcast_keep_d16_sq128_sk97_p20" + suffix, 128, 97, 16, 0.2);
    c.heads = 4;
    c.kv_heads = 2;
    c.dropout_broadcast = true;
    c.precision = p;
    g.push_back(c);
    c = cfg("causal_tl_d16_s1025_p10" + suffix, 1025, 1025, 16, 0.1);
    c.causal = true;
    c.precision = p;
    g.push_back(c);
    c = cfg("d64_sq1_sk1025_p50" + suffix, 1, 1025, 64, 0.5);
    c.precision = p;
    g.push_back(c);
  }
  return g;
}

class DropoutLowPrecisionRule : public ::testing::TestWithParam<CaseConfig> {};

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

TEST_P(DropoutLowPrecisionRule, fused_within_2x_unfused_error_3x_for_gradients) {
  const TestCase c = make_case(GetParam());
  const ReferenceTrace ref = run_reference(c);
  const CpuAttnResult fused = run_cpu(c, Mode::fused);
  const CpuAttnResult unfused = run_cpu(c, Mode::unfused);
  expect_rule("o", 2, fused.o, unfused.o, ref.o);
  expect_rule("lse", 2, fused.lse, unfused.lse, ref.lse);
  expect_rule("dq", 3, fused.dq, unfused.dq, ref.dq);
  expect_rule("dk", 3, fused.dk, unfused.dk, ref.dk);
  expect_rule("dv", 3, fused.dv, unfused.dv, ref.dv);
  // Both stay near the reference at all: dropout is applied, not just rounded away.
  EXPECT_LE(max_abs_diff(unfused.o, ref.o), 0.05 * max_abs(ref.o));
  const Precision p = GetParam().precision;
  for (const CpuAttnResult* r : {&fused, &unfused}) {
    expect_representable("o", p, r->o);
    expect_representable("dq", p, r->dq);
    expect_representable("dk", p, r->dk);
    expect_representable("dv", p, r->dv);
  }
}

INSTANTIATE_TEST_SUITE_P(Grid, DropoutLowPrecisionRule, ::testing::ValuesIn(low_precision_grid()),
                         [](const ::testing::TestParamInfo<CaseConfig>& info) {
                           return "fused_dropout_" + info.param.name;
                         });

void expect_all_bits_equal(const CpuAttnResult& a, const CpuAttnResult& b, const char* what) {
  for (const auto& [field, name] : {std::pair{&CpuAttnResult::o, "o"},
                                    {&CpuAttnResult::lse, "lse"},
                                    {&CpuAttnResult::m, "m"},
                                    {&CpuAttnResult::l, "l"},
                                    {&CpuAttnResult::d, "d"},
                                    {&CpuAttnResult::dq, "dq"},
                                    {&CpuAttnResult::dk, "dk"},
                                    {&CpuAttnResult::dv, "dv"}}) {
    EXPECT_TRUE(same_bits(a.*field, b.*field)) << what << ": " << name;
  }
}

CaseConfig gqa_everything_dropout(Precision precision) {
  CaseConfig c = cfg("gqa_everything", 200, 300, 64, 0.3);
  c.heads = 2;
  c.kv_heads = 1;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.mask = MaskKind::full;
  c.bias = true;
  c.softcap = 4.0;
  c.precision = precision;
  return c;
}

TEST(DropoutDeterminism, threads_1_2_3_bit_identical_fused_f32_bf16_unfused_f16_and_chunked_dq) {
  CaseConfig single = cfg("single_head_chunked_dq", 1000, 1000, 32, 0.2);
  single.causal = true;
  for (const auto& [config, mode] : {std::pair{gqa_everything_dropout(Precision::f32), Mode::fused},
                                     {gqa_everything_dropout(Precision::bf16), Mode::fused},
                                     {gqa_everything_dropout(Precision::f16), Mode::unfused},
                                     {single, Mode::fused}}) {
    const TestCase t = make_case(config);
    const CpuAttnResult one = run_cpu(t, mode, 1);
    for (int threads : {2, 3}) {
      expect_all_bits_equal(one, run_cpu(t, mode, threads), config.name.c_str());
    }
  }
}

// Keep-mask all ones, p = 0: every factor is 1, so not a bit changes, fused or unfused.
TEST(Dropout, all_kept_with_p0_is_bit_identical_to_no_dropout_fused_unfused_f32_f16_bf16) {
  for (Precision p : {Precision::f32, Precision::f16, Precision::bf16}) {
    CaseConfig c = gqa_everything_dropout(p);
    c.dropout = false;
    const TestCase plain = make_case(c);
    TestCase kept = plain;
    add_dropout(kept, 0.0, false, 5);
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      expect_all_bits_equal(run_cpu(plain, mode), run_cpu(kept, mode), "all kept");
    }
  }
}

// Dropout changes O and the gradients, not the softmax statistics.
TEST(Dropout, changes_outputs_but_not_m_l_lse_fused_unfused_bf16) {
  CaseConfig c = cfg("bf16", 97, 130, 32, 0.3);
  c.precision = Precision::bf16;
  c.dropout = false;
  const TestCase plain = make_case(c);
  TestCase dropped = plain;
  add_dropout(dropped, 0.3, false, 9);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    const CpuAttnResult a = run_cpu(plain, mode), b = run_cpu(dropped, mode);
    EXPECT_TRUE(same_bits(a.m, b.m));
    EXPECT_TRUE(same_bits(a.l, b.l));
    EXPECT_TRUE(same_bits(a.lse, b.lse));
    EXPECT_FALSE(same_bits(a.o, b.o));
    EXPECT_FALSE(same_bits(a.dq, b.dq));
    EXPECT_FALSE(same_bits(a.dv, b.dv));
  }
}

// Key 70 is dropped for every query and v_70 is NaN: its weights are exactly 0, yet 0 * NaN
// poisons O (and, through dP, dQ and dK) exactly where the reference has NaN; dV_70 stays 0.
TEST(Dropout, dropped_key_with_nan_value_poisons_like_reference_fused_unfused_f32_bf16) {
  for (Precision p : {Precision::f32, Precision::bf16}) {
    CaseConfig c = cfg("nan", 97, 130, 32, 0.3);
    c.causal = true;
    c.align = CausalAlign::bottom_right;
    c.precision = p;
    TestCase t = make_case(c);
    for (int64_t i = 0; i < c.sq; ++i) t.keep[static_cast<size_t>(i * c.sk + 70)] = 0;
    t.v[static_cast<size_t>(70 * c.d + 3)] = std::numeric_limits<float>::quiet_NaN();
    const ReferenceTrace ref = run_reference(t);
    ASSERT_TRUE(std::isnan(ref.o[3]));
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      const CpuAttnResult r = run_cpu(t, mode);
      SCOPED_TRACE(mode == Mode::fused ? "fused" : "unfused");
      EXPECT_EQ(nonfinite_mismatches(r.o, ref.o), 0);
      EXPECT_EQ(nonfinite_mismatches(r.dq, ref.dq), 0);
      EXPECT_EQ(nonfinite_mismatches(r.dk, ref.dk), 0);
      EXPECT_EQ(nonfinite_mismatches(r.dv, ref.dv), 0);
      for (int64_t e = 0; e < c.d; ++e) EXPECT_EQ(r.dv[static_cast<size_t>(70 * c.d + e)], 0.0f);
    }
  }
}

// Sk = 1 gives P = 1, so O pins where each kernel rounds the 1 / (1 - p) of p = 0.1. Unfused
// (torch.dropout at fp16): O = round(noise * v) with noise = round(1 / 0.9) to fp16 first.
// Fused (FA2): O = round(v * (1 / l * rp)) with rp = 1 / (1 - p) in fp32. Dropped rows: O = 0.
TEST(Dropout, sk1_o_pins_the_rounding_of_the_dropout_scale_fused_unfused_f16) {
  CaseConfig c = cfg("sk1", 256, 1, 16, 0.1);
  c.precision = Precision::f16;
  const TestCase t = make_case(c);
  const float noise = round_to_half(1.0f / 0.9f), rp = 1.0f / (1.0f - 0.1f);
  const CpuAttnResult fused = run_cpu(t, Mode::fused), unfused = run_cpu(t, Mode::unfused);
  int64_t differ = 0, kept = 0;
  for (int64_t i = 0; i < c.sq; ++i) {
    const bool keep = t.keep[static_cast<size_t>(i)] != 0;
    kept += keep;
    for (int64_t e = 0; e < c.d; ++e) {
      const float v = t.v[static_cast<size_t>(e)];
      const float want_fused = keep ? round_to_half(v * rp) : 0.0f;
      const float want_unfused = keep ? round_to_half(noise * v) : 0.0f;
      const size_t at = static_cast<size_t>(i * c.d + e);
      EXPECT_EQ(fused.o[at], want_fused) << i << "," << e;
      EXPECT_EQ(unfused.o[at], want_unfused) << i << "," << e;
      differ += want_fused != want_unfused;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, c.sq);
  EXPECT_GT(differ, 0);  // the two rounding points are told apart
}

TEST(Dropout, bad_dropout_parameters_throw_invalid_argument) {
  const TestCase t = make_case(cfg("bad", 17, 17, 16, 0.5));
  for (double p : {1.0, -0.1, std::numeric_limits<double>::quiet_NaN()}) {
    AttnParams prm = params_of(t);
    prm.dropout_p = p;
    EXPECT_THROW(cpu_attention(prm, {}, inputs_of(t)), std::invalid_argument) << p;
  }
  AttnParams no_mask = params_of(t);
  no_mask.dropout_keep = nullptr;
  EXPECT_THROW(cpu_attention(no_mask, {}, inputs_of(t)), std::invalid_argument);
}

}  // namespace
}  // namespace attnscope::test
