// Reference attention under masks: fill policies on fully masked rows, -inf bias, causal
// alignments and NaN behind the mask.
#include "kernels/reference/reference_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tests/kernels/reference_test_util.h"

namespace attnscope {
namespace {

using test::Inputs;
using test::kInf;
using test::masked_row_case;
using test::random_inputs;
using test::sizes;

// Row 1 is not fully masked: every policy that fills -inf gives it the same values.
void expect_row1_like_neg_inf(const ReferenceTrace& t) {
  const ReferenceTrace ref = masked_row_case(MaskFill::neg_inf).run();
  for (int64_t j = 3; j < 6; ++j) EXPECT_EQ(t.p[j], ref.p[j]);
  for (int64_t c = 2; c < 4; ++c) EXPECT_EQ(t.o[c], ref.o[c]);
  EXPECT_EQ(t.lse[1], ref.lse[1]);
  for (int64_t c = 2; c < 4; ++c) EXPECT_EQ(t.dq[c], ref.dq[c]);
}

TEST(ReferenceMasking, fully_masked_row_neg_inf_gives_nan) {
  const ReferenceTrace t = masked_row_case(MaskFill::neg_inf).run();
  EXPECT_EQ(t.s[0], -kInf);
  EXPECT_EQ(t.m[0], -kInf);
  EXPECT_TRUE(std::isnan(t.l[0]));
  EXPECT_TRUE(std::isnan(t.lse[0]));
  for (int64_t j = 0; j < 3; ++j) EXPECT_TRUE(std::isnan(t.p[j]));
  for (int64_t c = 0; c < 2; ++c) EXPECT_TRUE(std::isnan(t.o[c]));
  for (int64_t c = 0; c < 2; ++c) EXPECT_TRUE(std::isnan(t.dq[c]));
  for (double x : t.dk) EXPECT_TRUE(std::isnan(x));  // NaN dS of row 0 reaches every key
  for (double x : t.dv) EXPECT_TRUE(std::isnan(x));  // NaN P of row 0 reaches every value
  for (int64_t c = 2; c < 4; ++c) EXPECT_TRUE(std::isfinite(t.o[c]));
  EXPECT_EQ(t.p[5], 0.0);
}

TEST(ReferenceMasking, fully_masked_row_neg_1e9_attends_padding_uniformly) {
  const Inputs in = masked_row_case(MaskFill::neg_1e9);
  const ReferenceTrace t = Inputs(in).run();
  EXPECT_EQ(t.s[0], -1e9);
  EXPECT_EQ(t.m[0], -1e9);
  EXPECT_EQ(t.l[0], 3.0);
  EXPECT_EQ(t.lse[0], -1e9 + std::log(3.0));
  for (int64_t j = 0; j < 3; ++j) EXPECT_NEAR(t.p[j], 1.0 / 3.0, 1e-15);
  for (int64_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(t.o[c], (in.v[c] + in.v[2 + c] + in.v[4 + c]) / 3, 1e-15);
    EXPECT_EQ(t.dq[c], 0.0);  // a constant fill passes no gradient to q
  }
  EXPECT_NEAR(t.p[5], 0.0, 1e-300);  // exp(-1e9 - lse) underflows to 0 in row 1
  expect_row1_like_neg_inf(t);
}

TEST(ReferenceMasking, fully_masked_row_finfo_min_f16_fills_minus_65504) {
  const Inputs in = masked_row_case(MaskFill::finfo_min, Precision::f16);
  const ReferenceTrace t = Inputs(in).run();
  EXPECT_EQ(t.s[0], -65504.0);
  EXPECT_EQ(t.m[0], -65504.0);
  EXPECT_EQ(t.lse[0], -65504.0 + std::log(3.0));
  for (int64_t j = 0; j < 3; ++j) EXPECT_NEAR(t.p[j], 1.0 / 3.0, 1e-15);
  for (int64_t c = 0; c < 2; ++c) {
    EXPECT_NEAR(t.o[c], (in.v[c] + in.v[2 + c] + in.v[4 + c]) / 3, 1e-15);
  }
  expect_row1_like_neg_inf(t);
}

TEST(ReferenceMasking, fully_masked_row_safe_gives_zeros) {
  const Inputs in = masked_row_case(MaskFill::safe);
  const ReferenceTrace t = Inputs(in).run();
  EXPECT_EQ(t.m[0], -kInf);
  EXPECT_EQ(t.l[0], 0.0);
  EXPECT_EQ(t.lse[0], -kInf);
  for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(t.p[j], 0.0);
  for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(t.ds[j], 0.0);
  for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(t.o[c], 0.0);
  for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(t.dq[c], 0.0);
  expect_row1_like_neg_inf(t);

  // dK, dV come from row 1 alone: equal to a run without row 0.
  Inputs row1 = in;
  row1.p.seqlen_q = 1;
  row1.q.erase(row1.q.begin(), row1.q.begin() + 2);
  row1.dout.erase(row1.dout.begin(), row1.dout.begin() + 2);
  row1.mask.erase(row1.mask.begin(), row1.mask.begin() + 3);
  const ReferenceTrace only = row1.run();
  EXPECT_EQ(t.dk, only.dk);
  EXPECT_EQ(t.dv, only.dv);
}

// A row whose every key has bias -inf behaves like a fully masked row.
TEST(ReferenceMasking, all_minus_inf_bias_row_like_fully_masked) {
  Inputs in = random_inputs(sizes(1, 1, 1, 2, 3, 2, 2), 22);
  in.bias = {-kInf, -kInf, -kInf, 0.5, -kInf, -0.25};
  in.p.bias_strides = {0, 0, 3, 1};
  ReferenceTrace t = in.run();
  EXPECT_TRUE(std::isnan(t.o[0]));
  EXPECT_TRUE(std::isnan(t.lse[0]));
  EXPECT_EQ(t.p[4], 0.0);
  EXPECT_TRUE(std::isfinite(t.o[2]));

  in.p.mask_fill = MaskFill::safe;
  t = in.run();
  EXPECT_EQ(t.lse[0], -kInf);
  EXPECT_EQ(t.o[0], 0.0);
  EXPECT_EQ(t.dq[0], 0.0);
  for (double x : t.dk) EXPECT_TRUE(std::isfinite(x));
  EXPECT_EQ(t.p[4], 0.0);
  EXPECT_NEAR(t.p[3] + t.p[5], 1.0, 1e-15);
  EXPECT_NEAR(
      t.s[3] - t.s[5],
      (0.5 + 0.25) + in.p.scale * ((in.q[2] * (in.k[0] - in.k[4])) + in.q[3] * (in.k[1] - in.k[5])),
      1e-15);
}

// NaN behind the mask (DESIGN §4 masked_nan_leak): a hidden NaN key never reaches S, O or
// dK, but dQ_i = sum_j dS_ij k_j multiplies its zero dS by NaN; a hidden NaN value reaches O
// through 0 * NaN.
TEST(ReferenceMasking, masked_nan_key_leaks_into_dq_only) {
  Inputs in = random_inputs(sizes(1, 1, 1, 2, 3, 2, 2), 23);
  in.mask = {1, 1, 0};  // key padding [1, 1, 1, Sk]
  in.p.mask_strides = {0, 0, 0, 1};
  in.k[4] = std::nan("");
  ReferenceTrace t = in.run();
  for (double x : t.s) EXPECT_FALSE(std::isnan(x));
  for (double x : t.o) EXPECT_TRUE(std::isfinite(x));
  for (double x : t.dk) EXPECT_TRUE(std::isfinite(x));
  for (double x : t.dv) EXPECT_TRUE(std::isfinite(x));
  for (int64_t i = 0; i < 2; ++i) {  // the NaN is feature 0 of key 2
    EXPECT_TRUE(std::isnan(t.dq[i * 2]));
    EXPECT_TRUE(std::isfinite(t.dq[i * 2 + 1]));
  }

  in.k[4] = 0.5;
  in.v[5] = std::nan("");
  t = in.run();
  EXPECT_TRUE(std::isfinite(t.o[0]));
  EXPECT_TRUE(std::isnan(t.o[1]));
  EXPECT_TRUE(std::isnan(t.o[3]));
}

// A NaN score is not an empty row: under `safe` it stays NaN (m, LSE, P and O of that row).
TEST(ReferenceMasking, nan_query_row_stays_nan_under_safe) {
  Inputs in = random_inputs(sizes(1, 1, 1, 2, 3, 2, 2), 24);
  in.p.mask_fill = MaskFill::safe;
  in.q[0] = std::nan("");
  const ReferenceTrace t = in.run();
  EXPECT_TRUE(std::isnan(t.m[0]));
  EXPECT_TRUE(std::isnan(t.lse[0]));
  EXPECT_TRUE(std::isnan(t.o[0]));
  EXPECT_TRUE(std::isfinite(t.o[2]));
  for (double x : t.dk) EXPECT_TRUE(std::isnan(x));
}

// Visible set of a causal run: p > 0 exactly where key j is visible to query i.
void expect_visible(const ReferenceTrace& t, int64_t sq, int64_t sk, int64_t shift) {
  for (int64_t i = 0; i < sq; ++i) {
    for (int64_t j = 0; j < sk; ++j) {
      const double p = t.p[i * sk + j];
      if (j <= i + shift) {
        EXPECT_GT(p, 0.0) << i << "," << j;
      } else {
        EXPECT_EQ(p, 0.0) << i << "," << j;
        EXPECT_EQ(t.s[i * sk + j], -kInf);
      }
    }
  }
}

TEST(ReferenceMasking, causal_top_left_vs_bottom_right_sq3_sk5) {
  Inputs in = random_inputs(sizes(1, 1, 1, 3, 5, 4, 4), 31);
  in.p.causal = true;
  expect_visible(in.run(), 3, 5, 0);
  in.p.causal_align = CausalAlign::bottom_right;
  expect_visible(in.run(), 3, 5, 2);
}

// Sq > Sk bottom-right: the first Sq - Sk rows see no key at all.
TEST(ReferenceMasking, causal_bottom_right_sq5_sk3_first_rows_fully_masked) {
  Inputs in = random_inputs(sizes(1, 1, 1, 5, 3, 4, 4), 32);
  in.p.causal = true;
  in.p.causal_align = CausalAlign::bottom_right;
  ReferenceTrace t = in.run();
  EXPECT_TRUE(std::isnan(t.lse[0]));
  EXPECT_TRUE(std::isnan(t.lse[1]));
  EXPECT_TRUE(std::isfinite(t.lse[2]));
  in.p.mask_fill = MaskFill::safe;
  t = in.run();
  EXPECT_EQ(t.lse[0], -kInf);
  EXPECT_EQ(t.lse[1], -kInf);
  for (int64_t c = 0; c < 8; ++c) EXPECT_EQ(t.o[c], 0.0);
  expect_visible(t, 5, 3, -2);
}

}  // namespace
}  // namespace attnscope
