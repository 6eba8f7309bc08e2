// Exact-value, GQA and finite-difference tests of the naive fp64 reference attention.
#include "kernels/reference/reference_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tests/kernels/reference_test_util.h"

namespace attnscope {
namespace {

using test::expect_gradients_match_finite_differences;
using test::Inputs;
using test::kInf;
using test::masked_row_case;
using test::random_inputs;
using test::random_vector;
using test::sizes;

// Sq = 1, Sk = 2, D = Dv = 1, scores [0, log 3]: p = [1/4, 3/4], lse = log 4.
TEST(ReferenceAttention, two_keys_known_scores_exact) {
  Inputs in;
  in.p = sizes(1, 1, 1, 1, 2, 1, 1);
  in.q = {1.0};
  in.k = {0.0, std::log(3.0)};
  in.v = {2.0, 6.0};
  const ReferenceTrace t = in.run();
  EXPECT_EQ(t.s[0], 0.0);
  EXPECT_EQ(t.s[1], std::log(3.0));
  EXPECT_EQ(t.m[0], std::log(3.0));
  EXPECT_NEAR(t.l[0], 4.0 / 3.0, 1e-15);
  EXPECT_NEAR(t.lse[0], std::log(4.0), 1e-15);
  EXPECT_NEAR(t.p[0], 0.25, 1e-15);
  EXPECT_NEAR(t.p[1], 0.75, 1e-15);
  EXPECT_NEAR(t.o[0], 5.0, 1e-14);
  // dO = 1: D = o = 5, dP = v = [2, 6], dS = p (dP - D) = [-3/4, 3/4].
  EXPECT_NEAR(t.d[0], 5.0, 1e-14);
  EXPECT_EQ(t.dp[0], 2.0);
  EXPECT_EQ(t.dp[1], 6.0);
  EXPECT_NEAR(t.ds[0], -0.75, 1e-14);
  EXPECT_NEAR(t.ds[1], 0.75, 1e-14);
  EXPECT_NEAR(t.dq[0], 0.75 * std::log(3.0), 1e-14);
  EXPECT_NEAR(t.dk[0], -0.75, 1e-14);
  EXPECT_NEAR(t.dk[1], 0.75, 1e-14);
  EXPECT_NEAR(t.dv[0], 0.25, 1e-15);
  EXPECT_NEAR(t.dv[1], 0.75, 1e-15);
}

// q = 0: every score is 0, P = 1/Sk, O = mean of V, LSE = log Sk, and dS = 0 for dO = 1.
TEST(ReferenceAttention, uniform_scores_average_values) {
  Inputs in = random_inputs(sizes(1, 1, 1, 3, 4, 2, 3), 11);
  std::fill(in.q.begin(), in.q.end(), 0.0);
  in.dout.clear();
  const ReferenceTrace t = in.run();
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(t.lse[i], std::log(4.0));
    for (int64_t j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(t.p[i * 4 + j], 0.25);
    for (int64_t c = 0; c < 3; ++c) {
      const double mean = (in.v[c] + in.v[3 + c] + in.v[6 + c] + in.v[9 + c]) / 4;
      EXPECT_NEAR(t.o[i * 3 + c], mean, 1e-15);
    }
  }
  for (double x : t.dk) EXPECT_NEAR(x, 0.0, 1e-15);
  for (double x : t.dv) EXPECT_DOUBLE_EQ(x, 0.75);  // 3 queries * 1/4
}

TEST(ReferenceAttention, null_dout_means_ones) {
  Inputs in = random_inputs(sizes(1, 2, 1, 3, 5, 4, 2), 12);
  std::fill(in.dout.begin(), in.dout.end(), 1.0);
  const ReferenceTrace with_ones = in.run();
  in.dout.clear();
  const ReferenceTrace with_null = in.run();
  EXPECT_EQ(with_ones.dq, with_null.dq);
  EXPECT_EQ(with_ones.dk, with_null.dk);
  EXPECT_EQ(with_ones.dv, with_null.dv);
}

// GQA (H = 4, Hk = 2) equals MHA on explicitly repeated kv heads, dk / dv summed per group.
TEST(ReferenceAttention, gqa_dk_dv_accumulate_over_group) {
  const int64_t S = 5, D = 3, Dv = 2;
  Inputs gqa = random_inputs(sizes(2, 4, 2, S, S, D, Dv), 41);
  Inputs mha = gqa;
  mha.p.kv_heads = 4;
  mha.k.clear();
  mha.v.clear();
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t h = 0; h < 4; ++h) {
      const int64_t src = b * 2 + h / 2;
      mha.k.insert(mha.k.end(), gqa.k.begin() + src * S * D, gqa.k.begin() + (src + 1) * S * D);
      mha.v.insert(mha.v.end(), gqa.v.begin() + src * S * Dv, gqa.v.begin() + (src + 1) * S * Dv);
    }
  }
  const ReferenceTrace g = gqa.run();
  const ReferenceTrace m = mha.run();
  EXPECT_EQ(g.o, m.o);
  EXPECT_EQ(g.lse, m.lse);
  EXPECT_EQ(g.dq, m.dq);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t hk = 0; hk < 2; ++hk) {
      const int64_t dst = b * 2 + hk, h0 = b * 4 + 2 * hk, h1 = h0 + 1;
      for (int64_t e = 0; e < S * D; ++e) {
        EXPECT_NEAR(g.dk[dst * S * D + e], m.dk[h0 * S * D + e] + m.dk[h1 * S * D + e], 1e-14);
      }
      for (int64_t e = 0; e < S * Dv; ++e) {
        EXPECT_NEAR(g.dv[dst * S * Dv + e], m.dv[h0 * S * Dv + e] + m.dv[h1 * S * Dv + e], 1e-14);
      }
    }
  }
}

TEST(ReferenceAttention, gradients_match_finite_differences) {
  expect_gradients_match_finite_differences(random_inputs(sizes(1, 2, 1, 3, 4, 3, 2), 51));
}

TEST(ReferenceAttention, gradients_match_finite_differences_mask_bias_causal_gqa) {
  Inputs in = random_inputs(sizes(2, 2, 1, 4, 3, 3, 2), 52);
  in.p.causal = true;
  in.p.causal_align = CausalAlign::bottom_right;
  in.mask = {1, 1, 0, 1, 1, 1};  // key padding [B, 1, 1, Sk]
  in.p.mask_strides = {3, 0, 0, 1};
  in.bias = random_vector(12, 53);  // [1, 1, Sq, Sk]
  in.bias[5] = -kInf;
  in.p.bias_strides = {0, 0, 3, 1};
  in.p.mask_fill = MaskFill::safe;  // rows 0 of bottom-right (shift -1) are empty: zeros
  expect_gradients_match_finite_differences(in);
}

TEST(ReferenceAttention, gradients_match_finite_differences_neg_1e9_fully_masked_row) {
  Inputs in = masked_row_case(MaskFill::neg_1e9);
  expect_gradients_match_finite_differences(in);
}

// Softcap 1.5 with scores up to ~3: the tanh derivative matters; checked by differences.
TEST(ReferenceAttention, softcap_derivative_matches_finite_differences) {
  Inputs in = random_inputs(sizes(1, 1, 1, 3, 4, 2, 2), 61);
  for (double& x : in.q) x *= 2.5;
  for (double& x : in.k) x *= 2.5;
  in.p.softcap = 1.5;
  const ReferenceTrace t = in.run();
  double max_abs_s = 0;
  for (int64_t e = 0; e < 12; ++e) {
    EXPECT_LT(std::abs(t.s[e]), 1.5);
    max_abs_s = std::max(max_abs_s, std::abs(t.s[e]));
  }
  EXPECT_GT(max_abs_s, 0.5);  // the cap bends the scores noticeably
  expect_gradients_match_finite_differences(in);
}

// The trace is self-consistent: D = rowsum(dO * O) = rowsum(P * dP), P rows sum to 1.
TEST(ReferenceAttention, trace_invariants_hold) {
  Inputs in = random_inputs(sizes(1, 2, 2, 6, 7, 5, 3), 71);
  const ReferenceTrace t = in.run();
  for (int64_t r = 0; r < 12; ++r) {
    double sum_p = 0, p_dp = 0;
    for (int64_t j = 0; j < 7; ++j) {
      sum_p += t.p[r * 7 + j];
      p_dp += t.p[r * 7 + j] * t.dp[r * 7 + j];
      EXPECT_NEAR(t.ds[r * 7 + j], t.p[r * 7 + j] * (t.dp[r * 7 + j] - t.d[r]), 1e-15);
    }
    EXPECT_NEAR(sum_p, 1.0, 1e-15);
    EXPECT_NEAR(p_dp, t.d[r], 1e-14);
    EXPECT_NEAR(t.lse[r], t.m[r] + std::log(t.l[r]), 1e-15);
  }
}

}  // namespace
}  // namespace attnscope
