// Thread-count independence: 1, 2 and 3 worker threads give bit-identical outputs (the work
// split depends only on the shape); plus a timing printout of fwd + bwd at B*H = 8, S = 2048,
// D = 64 (no assertion on speed).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cpu_test_util.h"

namespace attnscope::test {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_thread_count_independent(const CaseConfig& config, Mode mode) {
  const TestCase t = make_case(config);
  const CpuAttnResult one = run_cpu(t, mode, 1);
  for (int threads : {2, 3}) {
    const CpuAttnResult r = run_cpu(t, mode, threads);
    EXPECT_TRUE(same_bits(one.o, r.o)) << "o, threads " << threads;
    EXPECT_TRUE(same_bits(one.lse, r.lse)) << "lse, threads " << threads;
    EXPECT_TRUE(same_bits(one.m, r.m)) << "m, threads " << threads;
    EXPECT_TRUE(same_bits(one.l, r.l)) << "l, threads " << threads;
    EXPECT_TRUE(same_bits(one.d, r.d)) << "d, threads " << threads;
    EXPECT_TRUE(same_bits(one.dq, r.dq)) << "dq, threads " << threads;
    EXPECT_TRUE(same_bits(one.dk, r.dk)) << "dk, threads " << threads;
    EXPECT_TRUE(same_bits(one.dv, r.dv)) << "dv, threads " << threads;
  }
}

CaseConfig gqa_everything(Precision precision) {
  CaseConfig c;
  c.heads = 2;
  c.kv_heads = 1;
  c.sq = 200;
  c.sk = 300;
  c.d = 64;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.mask = MaskKind::full;
  c.bias = true;
  c.softcap = 4.0;
  c.precision = precision;
  return c;
}

TEST(Determinism, fused_gqa_causal_mask_bias_softcap_f32_threads_1_2_3_bit_identical) {
  expect_thread_count_independent(gqa_everything(Precision::f32), Mode::fused);
}

TEST(Determinism, fused_gqa_causal_mask_bias_softcap_bf16_threads_1_2_3_bit_identical) {
  expect_thread_count_independent(gqa_everything(Precision::bf16), Mode::fused);
}

// One group of two query heads: the unfused backward's three schedules (1 thread: whole groups;
// 2: the group's heads in parallel, summed in head order; 3: each q tile split by rows / keys).
TEST(Determinism, unfused_gqa_causal_mask_bias_softcap_f16_threads_1_2_3_bit_identical) {
  expect_thread_count_independent(gqa_everything(Precision::f16), Mode::unfused);
}

// One group of four query heads on 2 and 3 workers: heads in parallel, whose dK_h, dV_h are
// summed in head order (in fp32, where three terms or more round differently in another order).
TEST(Determinism, unfused_one_group_of_four_heads_f32_threads_1_2_3_bit_identical) {
  CaseConfig c = gqa_everything(Precision::f32);
  c.heads = 4;
  expect_thread_count_independent(c, Mode::unfused);
}

// One head, dropout: the unfused backward splits each q tile's stages over the workers by
// query rows (8 chunks per q tile) and by keys (3 chunks of whole kv tiles, the last short).
TEST(Determinism, unfused_single_head_dropout_sq150_sk600_f16_threads_1_2_3_bit_identical) {
  CaseConfig c;
  c.sq = 150;
  c.sk = 600;
  c.d = 32;
  c.causal = true;
  c.dropout = true;
  c.dropout_p = 0.2;
  c.precision = Precision::f16;
  expect_thread_count_independent(c, Mode::unfused);
}

// One head: the backward splits the kv tiles into chunks whose dQ partials are summed.
TEST(Determinism, fused_single_head_chunked_dq_sq1000_sk1000_threads_1_2_3_bit_identical) {
  CaseConfig c;
  c.sq = c.sk = 1000;
  c.d = 32;
  c.causal = true;
  expect_thread_count_independent(c, Mode::fused);
}

TEST(Timing, fused_fwd_bwd_bh8_s2048_d64_f32_2threads_prints_gflops) {
  CaseConfig c;
  c.heads = c.kv_heads = 8;
  c.sq = c.sk = 2048;
  c.d = 64;
  const TestCase t = make_case(c);
  const AttnParams p = params_of(t);
  CpuAttnOptions options;
  options.threads = 2;
  const CpuAttnInputs in{t.q.data(), t.k.data(), t.v.data(), t.dout.data()};
  const size_t rows = 8 * 2048;
  std::vector<float> o(rows * 64), lse(rows), m(rows), l(rows), d(rows);
  std::vector<float> dq(rows * 64), dk(rows * 64), dv(rows * 64);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  cpu_attention_forward(p, options, in, {o.data(), lse.data(), m.data(), l.data()});
  const auto t1 = clock::now();
  cpu_attention_backward(p, options, in, {o.data(), m.data(), l.data()},
                         {d.data(), dq.data(), dk.data(), dv.data()});
  const auto t2 = clock::now();
  const double fwd_s = std::chrono::duration<double>(t1 - t0).count();
  const double bwd_s = std::chrono::duration<double>(t2 - t1).count();
  const double fwd_flop = 4.0 * 8 * 2048.0 * 2048.0 * 64;
  std::printf(
      "fused f32 B*H=8 S=2048 D=64, 2 threads: fwd %.3f s (%.1f GFLOP/s), bwd %.3f s "
      "(%.1f GFLOP/s), fwd+bwd %.3f s\n",
      fwd_s, fwd_flop / fwd_s * 1e-9, bwd_s, 2.5 * fwd_flop / bwd_s * 1e-9, fwd_s + bwd_s);
  EXPECT_EQ(count_nonfinite(o) + count_nonfinite(dq), 0);
}

}  // namespace
}  // namespace attnscope::test
