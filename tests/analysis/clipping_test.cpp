// Pins clip_grad_norm_ emulation: exact coefficients, non-finite totals, GQA grouping.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/analysis/clipping.h"

namespace attnscope {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Clipping, norm_5_clipped_to_1_scales_by_max_over_total_plus_eps) {
  std::vector<float> g = {3.0f, 4.0f};
  const ClipResult r = clip_gradients({{"g", g.data(), 2}}, 1.0, Precision::f32);
  EXPECT_DOUBLE_EQ(r.total_norm, 5.0);
  EXPECT_DOUBLE_EQ(r.coef, 1.0 / (5.0 + 1e-6));
  EXPECT_EQ(g[0], 3.0f * static_cast<float>(1.0 / (5.0 + 1e-6)));
  EXPECT_EQ(g[1], 4.0f * static_cast<float>(1.0 / (5.0 + 1e-6)));
  EXPECT_NEAR(r.norms_after[0], 1.0, 1e-6);
  EXPECT_FALSE(r.nonfinite_total);
}

TEST(Clipping, total_below_max_norm_leaves_gradients_bit_identical) {
  std::vector<float> g = {0.1f, -0.2f, 0.3f};
  const std::vector<float> before = g;
  const ClipResult r = clip_gradients({{"g", g.data(), 3}}, 10.0, Precision::f32);
  EXPECT_EQ(r.coef, 1.0);
  EXPECT_EQ(g, before);
}

TEST(Clipping, total_over_several_tensors_is_norm_of_norms) {
  std::vector<float> a = {3.0f}, b = {4.0f}, c = {12.0f};
  const ClipResult r = clip_gradients({{"a", a.data(), 1}, {"b", b.data(), 1}, {"c", c.data(), 1}},
                                      1.0, Precision::f32);
  EXPECT_DOUBLE_EQ(r.total_norm, 13.0);
  ASSERT_EQ(r.norms_before.size(), 3u);
  EXPECT_DOUBLE_EQ(r.norms_before[2], 12.0);
}

TEST(Clipping, infinite_total_zeroes_finite_elements_and_turns_inf_into_nan) {
  std::vector<float> a = {1.0f, kInf}, b = {2.0f};
  const ClipResult r =
      clip_gradients({{"a", a.data(), 2}, {"b", b.data(), 1}}, 1.0, Precision::f32);
  EXPECT_TRUE(r.nonfinite_total);
  EXPECT_EQ(r.coef, 0.0);
  EXPECT_EQ(a[0], 0.0f);
  EXPECT_TRUE(std::isnan(a[1]));
  EXPECT_EQ(b[0], 0.0f);
}

TEST(Clipping, nan_total_makes_every_gradient_nan) {
  std::vector<float> a = {1.0f, std::nanf("")}, b = {2.0f, -3.0f};
  const ClipResult r =
      clip_gradients({{"a", a.data(), 2}, {"b", b.data(), 2}}, 1.0, Precision::f32);
  EXPECT_TRUE(r.nonfinite_total);
  EXPECT_TRUE(std::isnan(r.coef));
  for (float x : a) EXPECT_TRUE(std::isnan(x));
  for (float x : b) EXPECT_TRUE(std::isnan(x));
}

TEST(Clipping, bf16_product_rounded_to_nearest_even) {
  std::vector<float> g = {1.0f, 0.0f};
  // total 1, max_norm 0.7: coef = 0.7 / (1 + 1e-6); 0.7 in bf16 is 0.69921875.
  clip_gradients({{"g", g.data(), 2}}, 0.7, Precision::bf16);
  EXPECT_EQ(g[0], 0.69921875f);
}

TEST(Clipping, per_kv_head_scope_clips_each_gqa_group_alone) {
  CaseGradients grads;
  grads.batch = 1;
  grads.heads = 4;
  grads.kv_heads = 2;
  grads.seqlen_q = grads.seqlen_k = 1;
  grads.head_dim = grads.head_dim_v = 1;
  grads.dq = {100.0f, 100.0f, 0.1f, 0.1f};  // heads 0, 1 read kv head 0; heads 2, 3 kv head 1
  grads.dk = {0.0f, 0.1f};
  grads.dv = {0.0f, 0.1f};
  const std::vector<ClipResult> r =
      clip_case_gradients(grads, ClipScope::per_kv_head, 1.0, Precision::f32);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_NEAR(r[0].total_norm, 100.0 * std::sqrt(2.0), 1e-4);
  EXPECT_LT(r[0].coef, 0.01);
  EXPECT_EQ(r[1].coef, 1.0);  // group 1 total = 0.2 < 1
  EXPECT_NEAR(grads.dq[0], 1.0 / std::sqrt(2.0), 1e-5);
  EXPECT_EQ(grads.dq[2], 0.1f);
}

TEST(Clipping, whole_case_scope_one_clip_over_dq_dk_dv) {
  CaseGradients grads;
  grads.batch = grads.heads = grads.kv_heads = 1;
  grads.seqlen_q = grads.seqlen_k = 1;
  grads.head_dim = grads.head_dim_v = 1;
  grads.dq = {3.0f};
  grads.dk = {4.0f};
  grads.dv = {0.0f};
  const std::vector<ClipResult> r =
      clip_case_gradients(grads, ClipScope::whole_case, 1.0, Precision::f32);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_DOUBLE_EQ(r[0].total_norm, 5.0);
  EXPECT_NEAR(grads.dq[0], 0.6f, 1e-6);
  EXPECT_NEAR(grads.dk[0], 0.8f, 1e-6);
}

}  // namespace
}  // namespace attnscope
