// The public CPU attention API: absent dO means ones, invalid shapes are refused, f64 runs as
// f32, and head dims up to 256 with D != Dv.
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "cpu_test_util.h"

namespace attnscope::test {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CpuApi, null_dout_means_all_ones_fused_and_unfused) {
  CaseConfig c;
  c.sq = 33;
  c.sk = 70;
  c.d = 32;
  c.causal = true;
  TestCase t = make_case(c);
  std::fill(t.dout.begin(), t.dout.end(), 1.0f);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    CpuAttnOptions options;
    options.mode = mode;
    const CpuAttnResult ones = run_cpu(t, mode);
    const CpuAttnResult absent =
        cpu_attention(params_of(t), options, {t.q.data(), t.k.data(), t.v.data(), nullptr});
    EXPECT_TRUE(same_bits(ones.dq, absent.dq));
    EXPECT_TRUE(same_bits(ones.dk, absent.dk));
    EXPECT_TRUE(same_bits(ones.dv, absent.dv));
  }
}

TEST(CpuApi, kv_heads_not_dividing_heads_throws_invalid_argument) {
  CaseConfig c;
  c.heads = 3;
  c.kv_heads = 1;
  TestCase t = make_case(c);
  AttnParams p = params_of(t);
  p.kv_heads = 2;
  EXPECT_THROW(cpu_attention(p, {}, {t.q.data(), t.k.data(), t.v.data(), nullptr}),
               std::invalid_argument);
  p.kv_heads = 1;
  EXPECT_THROW(cpu_attention(p, {}, {nullptr, t.k.data(), t.v.data(), nullptr}),
               std::invalid_argument);
}

TEST(CpuApi, f64_precision_runs_as_f32) {
  CaseConfig c;
  c.sq = 40;
  c.sk = 90;
  c.d = 16;
  TestCase t = make_case(c);
  const CpuAttnResult f32 = run_cpu(t, Mode::fused);
  t.config.precision = Precision::f64;
  const CpuAttnResult f64 = run_cpu(t, Mode::fused);
  EXPECT_TRUE(same_bits(f32.o, f64.o));
  EXPECT_TRUE(same_bits(f32.dq, f64.dq));
}

TEST(CpuApi, head_dim_256_dv_128_sq65_sk130_matches_reference_f32) {
  CaseConfig c;
  c.sq = 65;
  c.sk = 130;
  c.d = 256;
  c.dv = 128;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  const TestCase t = make_case(c);
  const ReferenceTrace ref = run_reference(t);
  const CpuAttnResult r = run_cpu(t, Mode::fused);
  EXPECT_LE(max_abs_diff(r.o, ref.o), 1e-5 * max_abs(ref.o));
  EXPECT_LE(max_abs_diff(r.dq, ref.dq), 1e-5 * max_abs(ref.dq));
  EXPECT_LE(max_abs_diff(r.dk, ref.dk), 1e-5 * max_abs(ref.dk));
  EXPECT_LE(max_abs_diff(r.dv, ref.dv), 1e-5 * max_abs(ref.dv));
}

}  // namespace
}  // namespace attnscope::test
