// CpuAttnOptions::cancelled: a run whose predicate turns true stops at the next poll of each
// worker and throws KernelCancelled (never a result); a predicate that stays false changes no
// output bit. Counted polls pin "within one tile per worker" without timing anything.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/cpu/head_matrices.h"

namespace attnscope::test {
namespace {

constexpr int kThreads = 2;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Causal GQA case with mask, bias and softcap: every driver path (skipped tiles included).
TestCase busy_case(Precision precision, int64_t s = 300) {
  CaseConfig c;
  c.heads = 4;
  c.kv_heads = 2;
  c.sq = s;
  c.sk = s + 37;
  c.d = 64;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.mask = MaskKind::full;
  c.bias = true;
  c.softcap = 4.0;
  c.precision = precision;
  return make_case(c);
}

// A predicate that counts its calls and says "cancelled" from call `after` + 1 on.
struct CountingCancel {
  explicit CountingCancel(int after) : after(after) {}
  const int after;
  std::atomic<int> calls{0};
  std::function<bool()> fn() {
    return [this] { return ++calls > after; };
  }
};

CpuAttnOptions options(Mode mode, std::function<bool()> cancelled = {}) {
  CpuAttnOptions o;
  o.mode = mode;
  o.threads = kThreads;
  o.cancelled = std::move(cancelled);
  return o;
}

// The forward's outputs of a case (shapes as CpuForwardOutputs) for calling the backward alone.
struct Forward {
  std::vector<float> o, lse, m, l;
};

Forward forward_of(const TestCase& t, Mode mode) {
  const CpuAttnResult r = run_cpu(t, mode, kThreads);
  return {r.o, r.lse, r.m, r.l};
}

void run_forward(const TestCase& t, const CpuAttnOptions& opt, Forward& f) {
  cpu_attention_forward(params_of(t), opt, inputs_of(t),
                        {f.o.data(), f.lse.data(), f.m.data(), f.l.data()});
}

void run_backward(const TestCase& t, const CpuAttnOptions& opt, const Forward& f) {
  const CpuAttnResult shape = run_cpu(t, opt.mode, kThreads);
  std::vector<float> d(shape.d.size()), dq(shape.dq.size()), dk(shape.dk.size()),
      dv(shape.dv.size());
  cpu_attention_backward(params_of(t), opt, inputs_of(t), {f.o.data(), f.m.data(), f.l.data()},
                         {d.data(), dq.data(), dk.data(), dv.data()});
}

class CancelMode : public ::testing::TestWithParam<Mode> {};

TEST_P(CancelMode, forward_cancelled_before_start_polls_once_per_worker_at_most) {
  const TestCase t = busy_case(Precision::bf16);
  Forward f = forward_of(t, GetParam());
  CountingCancel cancel(0);
  EXPECT_THROW(run_forward(t, options(GetParam(), cancel.fn()), f), KernelCancelled);
  EXPECT_GE(cancel.calls.load(), 1);
  EXPECT_LE(cancel.calls.load(), kThreads);
}

TEST_P(CancelMode, backward_cancelled_before_start_polls_once_per_worker_at_most) {
  const TestCase t = busy_case(Precision::f16);
  const Forward f = forward_of(t, GetParam());
  CountingCancel cancel(0);
  EXPECT_THROW(run_backward(t, options(GetParam(), cancel.fn()), f), KernelCancelled);
  EXPECT_GE(cancel.calls.load(), 1);
  EXPECT_LE(cancel.calls.load(), kThreads);
}

// Cancelled after 10 polls: every worker stops at its next poll, so at most one more each.
TEST_P(CancelMode, forward_and_backward_cancelled_mid_run_stop_at_the_next_poll) {
  const TestCase t = busy_case(Precision::f32);
  Forward f = forward_of(t, GetParam());
  CountingCancel fwd(10), bwd(10);
  EXPECT_THROW(run_forward(t, options(GetParam(), fwd.fn()), f), KernelCancelled);
  EXPECT_LE(fwd.calls.load(), 10 + kThreads);
  EXPECT_THROW(run_backward(t, options(GetParam(), bwd.fn()), f), KernelCancelled);
  EXPECT_LE(bwd.calls.load(), 10 + kThreads);
}

// A pooled capture of a cancelled backward receives nothing.
TEST_P(CancelMode, cancelled_backward_leaves_the_pooled_capture_empty) {
  const TestCase t = busy_case(Precision::bf16);
  const Forward f = forward_of(t, GetParam());
  PooledCapture capture;
  capture.h = 1;
  capture.out_rows = 40;
  capture.out_cols = 50;
  CountingCancel cancel(5);
  CpuAttnOptions opt = options(GetParam(), cancel.fn());
  opt.pooled = &capture;
  EXPECT_THROW(run_backward(t, opt, f), KernelCancelled);
  EXPECT_EQ(capture.result.rows, 0);
  EXPECT_TRUE(capture.result.s.max.empty());
}

TEST_P(CancelMode, head_and_pooled_matrices_cancelled_mid_run_stop_at_the_next_poll) {
  const TestCase t = busy_case(Precision::f16);
  CountingCancel full(3), pooled(3);
  EXPECT_THROW(cpu_head_matrices(params_of(t), options(GetParam(), full.fn()), inputs_of(t), 0, 1),
               KernelCancelled);
  EXPECT_LE(full.calls.load(), 3 + kThreads);
  EXPECT_THROW(cpu_pooled_matrices(params_of(t), options(GetParam(), pooled.fn()), inputs_of(t), 0,
                                   3, 30, 30),
               KernelCancelled);
  EXPECT_LE(pooled.calls.load(), 3 + kThreads);
}

// Polling that never cancels: every output of the forward, the backward, the pooled capture
// and the head matrices is bit-identical to the run without a predicate.
TEST_P(CancelMode, predicate_that_stays_false_changes_no_output_bit) {
  const TestCase t = busy_case(Precision::bf16);
  CountingCancel never(1 << 30);
  PooledCapture plain_capture, polled_capture;
  plain_capture.h = polled_capture.h = 2;
  CpuAttnOptions plain = options(GetParam());
  plain.pooled = &plain_capture;
  CpuAttnOptions polled = options(GetParam(), never.fn());
  polled.pooled = &polled_capture;
  const CpuAttnResult a = cpu_attention(params_of(t), plain, inputs_of(t));
  const CpuAttnResult b = cpu_attention(params_of(t), polled, inputs_of(t));
  EXPECT_GT(never.calls.load(), 0);
  for (auto field :
       {&CpuAttnResult::o, &CpuAttnResult::lse, &CpuAttnResult::m, &CpuAttnResult::l,
        &CpuAttnResult::d, &CpuAttnResult::dq, &CpuAttnResult::dk, &CpuAttnResult::dv}) {
    EXPECT_TRUE(same_bits(a.*field, b.*field));
  }
  EXPECT_TRUE(same_bits(plain_capture.result.ds.max, polled_capture.result.ds.max));
  EXPECT_TRUE(same_bits(plain_capture.result.p.min, polled_capture.result.p.min));
  const HeadMatrices ha = cpu_head_matrices(params_of(t), plain, inputs_of(t), 0, 3);
  const HeadMatrices hb = cpu_head_matrices(params_of(t), polled, inputs_of(t), 0, 3);
  EXPECT_TRUE(same_bits(ha.ds, hb.ds));
  EXPECT_TRUE(same_bits(ha.s, hb.s));
}

// A flag set from another thread while a large fused forward + backward runs: the call throws
// KernelCancelled (the worker waits until the run has polled, so it is mid-run).
TEST_P(CancelMode, flag_set_from_another_thread_during_a_large_run_cancels_it) {
  const TestCase t = busy_case(Precision::f32, 2048);
  std::atomic<bool> flag{false};
  std::atomic<int> polls{0};
  const CpuAttnOptions opt = options(GetParam(), [&] {
    ++polls;
    return flag.load();
  });
  std::thread canceller([&] {
    while (polls.load() < 20) std::this_thread::yield();
    flag = true;
  });
  EXPECT_THROW(cpu_attention(params_of(t), opt, inputs_of(t)), KernelCancelled);
  canceller.join();
}

INSTANTIATE_TEST_SUITE_P(Cancel, CancelMode, ::testing::Values(Mode::fused, Mode::unfused),
                         [](const auto& info) {
                           return info.param == Mode::fused ? "fused" : "unfused";
                         });

}  // namespace
}  // namespace attnscope::test
