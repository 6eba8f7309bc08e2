// Where the CPU backward takes P from (AttnParams::backward_p): the fused kernel's from_lse
// recomputes exp(S - LSE) from the fp32 LSE it stored and reproduces the reference on a row
// whose every score is the finfo.min sentinel (gradients Sk times eager's); on ordinary rows it
// agrees with saved to rounding; the unfused (eager) kernel ignores it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "cpu_test_util.h"

namespace attnscope::test {
namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

size_t at(int64_t i) {
  return static_cast<size_t>(i);
}

constexpr int64_t kSentinelRow = 40;

// Sq = 70, Sk = 97 (two q and two kv tiles), a random bias and, on every key of row 40 of
// every head, the sentinel `finfo_min` of the precision (torch.finfo(dtype).min).
TestCase sentinel_case(Precision precision, BackwardP source) {
  CaseConfig c;
  c.heads = 2;
  c.sq = 70;
  c.sk = 97;
  c.d = 32;
  c.bias = true;
  c.precision = precision;
  c.backward_p = source;
  TestCase t = make_case(c);
  for (int64_t h = 0; h < c.heads; ++h) {
    for (int64_t j = 0; j < c.sk; ++j) {
      t.bias[at((h * c.sq + kSentinelRow) * c.sk + j)] = -finfo_max(precision);
    }
  }
  return t;
}

void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& ref,
                  double rel) {
  EXPECT_EQ(nonfinite_mismatches(got, ref), 0) << what;
  const double scale = std::max(max_abs(ref), 0.01);
  EXPECT_LE(max_abs_diff(got, ref) / scale, rel) << what << ": max |ref| = " << scale;
}

// dQ of the sentinel rows, and of the others, from one run.
struct RowSplit {
  std::vector<float> sentinel, others;
};

RowSplit split_dq(const TestCase& t, const std::vector<float>& dq) {
  const CaseConfig& g = t.config;
  RowSplit r;
  for (int64_t bh = 0; bh < g.batch * g.heads; ++bh) {
    for (int64_t i = 0; i < g.sq; ++i) {
      auto& to = i == kSentinelRow ? r.sentinel : r.others;
      const auto row = dq.begin() + (bh * g.sq + i) * g.d;
      to.insert(to.end(), row, row + g.d);
    }
  }
  return r;
}

double max_abs_f(const std::vector<float>& x) {
  double m = 0;
  for (float e : x) m = std::max(m, static_cast<double>(std::abs(e)));
  return m;
}

// |a - factor * b| over max |factor * b|.
double rel_diff(const std::vector<float>& a, const std::vector<float>& b, double factor) {
  double worst = 0, scale = 0;
  for (size_t e = 0; e < a.size(); ++e) {
    worst = std::max(worst, std::abs(a[e] - factor * b[e]));
    scale = std::max(scale, std::abs(factor * b[e]));
  }
  return worst / scale;
}

// PyTorch 2.11's CPU flash SDPA returns Sk times eager's gradients on such a row: LSE = m
// absorbs log Sk in fp32, so P = exp(S - LSE) = 1 on every key instead of 1 / Sk.
TEST(BackwardP, from_lse_sentinel_row_gradient_is_sk_times_eager_fused_f32) {
  const TestCase saved = sentinel_case(Precision::f32, BackwardP::saved);
  const TestCase lse = sentinel_case(Precision::f32, BackwardP::from_lse);
  const ReferenceTrace ref_saved = run_reference(saved), ref_lse = run_reference(lse);
  const CpuAttnResult got_saved = run_cpu(saved, Mode::fused), got_lse = run_cpu(lse, Mode::fused);
  EXPECT_EQ(got_lse.lse[at(kSentinelRow)], got_lse.m[at(kSentinelRow)]);
  for (const auto& [got, ref] : {std::pair{&got_saved, &ref_saved}, {&got_lse, &ref_lse}}) {
    expect_close("o", got->o, ref->o, 1e-5);
    expect_close("lse", got->lse, ref->lse, 1e-5);
    expect_close("dq", got->dq, ref->dq, 1e-5);
    expect_close("dk", got->dk, ref->dk, 1e-5);
    expect_close("dv", got->dv, ref->dv, 1e-5);
  }
  EXPECT_TRUE(same_bits(got_lse.o, got_saved.o));
  const RowSplit a = split_dq(lse, got_lse.dq), b = split_dq(saved, got_saved.dq);
  EXPECT_LE(rel_diff(a.sentinel, b.sentinel, 97.0), 1e-5);
  EXPECT_LE(rel_diff(a.others, b.others, 1.0), 1e-5);
  EXPECT_GT(max_abs_f(b.sentinel), 1e-4);
}

// The same at bf16 with bf16's finfo.min: P = 1 exactly against round(1 / 97), so the ratio
// holds to bf16 rounding.
TEST(BackwardP, from_lse_sentinel_row_gradient_is_sk_times_eager_fused_bf16) {
  const TestCase saved = sentinel_case(Precision::bf16, BackwardP::saved);
  const TestCase lse = sentinel_case(Precision::bf16, BackwardP::from_lse);
  const RowSplit a = split_dq(lse, run_cpu(lse, Mode::fused).dq);
  const RowSplit b = split_dq(saved, run_cpu(saved, Mode::fused).dq);
  EXPECT_LE(rel_diff(a.sentinel, b.sentinel, 97.0), 0.05);
  EXPECT_GT(rel_diff(a.sentinel, b.sentinel, 1.0), 10.0);
}

// The eager kernel saves the softmax output: backward_p changes no bit.
TEST(BackwardP, unfused_ignores_backward_p_bit_identical_sentinel_f32_and_f16) {
  for (Precision p : {Precision::f32, Precision::f16}) {
    const CpuAttnResult a = run_cpu(sentinel_case(p, BackwardP::saved), Mode::unfused);
    const CpuAttnResult b = run_cpu(sentinel_case(p, BackwardP::from_lse), Mode::unfused);
    EXPECT_TRUE(same_bits(a.dq, b.dq));
    EXPECT_TRUE(same_bits(a.dk, b.dk));
    EXPECT_TRUE(same_bits(a.dv, b.dv));
    EXPECT_TRUE(same_bits(a.d, b.d));
  }
}

CaseConfig ordinary(Precision precision, BackwardP source) {
  CaseConfig c;
  c.heads = 4;
  c.kv_heads = 2;
  c.sq = 97;
  c.sk = 150;
  c.d = 59;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.mask = MaskKind::key_padding;
  c.softcap = 3.0;
  c.dropout = true;
  c.dropout_p = 0.2;
  c.precision = precision;
  c.backward_p = source;
  return c;
}

// Ordinary rows: from_lse and saved differ by fp32 rounding of P only; both meet the accuracy
// rule against the reference.
TEST(BackwardP, from_lse_within_rounding_of_saved_on_ordinary_rows_fused_f32_bf16) {
  const TestCase ref_case = make_case(ordinary(Precision::f32, BackwardP::saved));
  const ReferenceTrace ref = run_reference(ref_case);
  const CpuAttnResult saved = run_cpu(ref_case, Mode::fused);
  const CpuAttnResult lse =
      run_cpu(make_case(ordinary(Precision::f32, BackwardP::from_lse)), Mode::fused);
  EXPECT_TRUE(same_bits(lse.o, saved.o));
  for (const auto& [what, got, want] :
       {std::tuple{"dq", &CpuAttnResult::dq, &ReferenceTrace::dq},
        std::tuple{"dk", &CpuAttnResult::dk, &ReferenceTrace::dk},
        std::tuple{"dv", &CpuAttnResult::dv, &ReferenceTrace::dv}}) {
    expect_close(what, lse.*got, ref.*want, 1e-5);
    EXPECT_LE(rel_diff(lse.*got, saved.*got, 1.0), 1e-5) << what;
  }
  const TestCase lo = make_case(ordinary(Precision::bf16, BackwardP::from_lse));
  const ReferenceTrace lo_ref = run_reference(lo);
  const CpuAttnResult lo_lse = run_cpu(lo, Mode::fused), lo_unfused = run_cpu(lo, Mode::unfused);
  for (const auto& [got, unf, want] : {std::tuple{&lo_lse.dq, &lo_unfused.dq, &lo_ref.dq},
                                       std::tuple{&lo_lse.dk, &lo_unfused.dk, &lo_ref.dk},
                                       std::tuple{&lo_lse.dv, &lo_unfused.dv, &lo_ref.dv}}) {
    EXPECT_LE(max_abs_diff(*got, *want), 3 * max_abs_diff(*unf, *want) + 1e-6);
  }
}

// A fully masked row under the safe fill keeps P = 0 (LSE = -inf), and under -inf stays NaN,
// matching the reference's from_lse; threads do not change a bit.
TEST(BackwardP, from_lse_fully_masked_rows_and_thread_count_independent_fused_f32) {
  for (MaskFill fill : {MaskFill::safe, MaskFill::neg_inf}) {
    TestCase t = fully_masked_row_case(fill, Precision::f32);
    t.config.backward_p = BackwardP::from_lse;
    const ReferenceTrace ref = run_reference(t);
    const CpuAttnResult one = run_cpu(t, Mode::fused, 1);
    expect_close("dq", one.dq, ref.dq, 1e-5);
    expect_close("dk", one.dk, ref.dk, 1e-5);
    expect_close("dv", one.dv, ref.dv, 1e-5);
    const CpuAttnResult three = run_cpu(t, Mode::fused, 3);
    EXPECT_TRUE(same_bits(one.dq, three.dq));
    EXPECT_TRUE(same_bits(one.dk, three.dk));
    EXPECT_TRUE(same_bits(one.dv, three.dv));
  }
}

}  // namespace
}  // namespace attnscope::test
