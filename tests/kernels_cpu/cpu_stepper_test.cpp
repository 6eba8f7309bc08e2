// The backward stepper (kernels/cpu/backward_stepper.h): after the last step its dQ, dK, dV
// and D are bit-identical to the one-shot fused backward; stepping back then forward, or
// seeking, reproduces the state exactly; "run to next non-finite" stops at the first stage
// and tile that produces one; the plan skips the kernel's tiles; tiles match the head matrices
// (final state and tiles also with dropout and BackwardP::from_lse).
#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/cpu/backward_stepper.h"
#include "kernels/cpu/head_matrices.h"

namespace attnscope::test {
namespace {

size_t at(int64_t i) {
  return static_cast<size_t>(i);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // Empty vectors may hold null data(), which memcmp must not see (UBSan).
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Elements [begin, begin + n) of x.
std::vector<float> slice(const std::vector<float>& x, int64_t begin, int64_t n) {
  return {x.begin() + begin, x.begin() + begin + n};
}

BackwardStepper make_stepper(const TestCase& t, const CpuAttnResult& r, int64_t b, int64_t h) {
  return BackwardStepper(params_of(t), {}, inputs_of(t), {r.o.data(), r.m.data(), r.l.data()}, b,
                         h);
}

// Runs every step of head (b, h) and compares with the one-shot kernel's outputs of that head.
void expect_stepped_equals_one_shot(const CaseConfig& config, int64_t b, int64_t h,
                                    bool kv_owned_by_head) {
  const TestCase t = make_case(config);
  const CpuAttnResult r = run_cpu(t, Mode::fused, 3);
  BackwardStepper stepper = make_stepper(t, r, b, h);
  stepper.seek(stepper.size());
  const StepperState& st = stepper.current();
  const CaseConfig& g = t.config;
  const int64_t bh = b * g.heads + h, bkv = b * g.kv_heads + h / (g.heads / g.kv_heads);
  EXPECT_EQ(st.step.stage, StepStage::store_dq);
  EXPECT_TRUE(same_bits(st.d, slice(r.d, bh * g.sq, g.sq)));
  EXPECT_TRUE(same_bits(st.dq, slice(r.dq, bh * g.sq * g.d, g.sq * g.d)));
  if (kv_owned_by_head) {
    EXPECT_TRUE(same_bits(st.dk, slice(r.dk, bkv * g.sk * g.d, g.sk * g.d)));
    EXPECT_TRUE(same_bits(st.dv, slice(r.dv, bkv * g.sk * g.dv, g.sk * g.dv)));
  }
}

TEST(Stepper, final_state_bit_identical_to_one_shot_b2_h2_causal_mask_bias_softcap_bf16) {
  CaseConfig c;
  c.batch = c.heads = c.kv_heads = 2;  // 4 kv groups: the kernel chunks dQ into 4 partials
  c.sq = 200;
  c.sk = 300;
  c.d = 32;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.mask = MaskKind::full;
  c.bias = true;
  c.softcap = 5.0;
  c.precision = Precision::bf16;
  expect_stepped_equals_one_shot(c, 1, 1, true);
}

TEST(Stepper, final_state_bit_identical_to_one_shot_single_head_s1000_f32_and_f16) {
  CaseConfig c;  // one kv group: 16 dQ partials over 16 kv tiles
  c.sq = c.sk = 1000;
  c.d = 64;
  for (Precision p : {Precision::f32, Precision::f16}) {
    c.precision = p;
    expect_stepped_equals_one_shot(c, 0, 0, true);
  }
}

TEST(Stepper, final_dq_bit_identical_to_one_shot_with_gqa) {
  CaseConfig c;
  c.heads = 4;
  c.kv_heads = 2;
  c.sq = 150;
  c.sk = 170;
  c.d = 16;
  c.causal = true;
  expect_stepped_equals_one_shot(c, 0, 3, false);
}

// Dropout (Z o dP, round(P o keep) into dV, dV scaled at its store) and P from the LSE run
// through the same stage functions in the stepper as in the kernel.
TEST(Stepper, final_state_bit_identical_to_one_shot_with_dropout_from_lse_bf16_and_gqa_f16) {
  CaseConfig c;
  c.batch = c.heads = c.kv_heads = 2;
  c.sq = 200;
  c.sk = 300;
  c.d = 32;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.mask = MaskKind::full;
  c.bias = true;
  c.softcap = 5.0;
  c.precision = Precision::bf16;
  c.dropout = true;
  c.dropout_p = 0.3;
  c.backward_p = BackwardP::from_lse;
  expect_stepped_equals_one_shot(c, 1, 1, true);
  CaseConfig g;
  g.heads = 4;
  g.kv_heads = 2;
  g.sq = 150;
  g.sk = 170;
  g.d = 16;
  g.causal = true;
  g.precision = Precision::f16;
  g.dropout = true;
  g.dropout_p = 0.2;
  g.dropout_broadcast = true;
  expect_stepped_equals_one_shot(g, 0, 3, false);
}

void expect_same_state(const StepperState& a, const StepperState& b) {
  EXPECT_EQ(a.step.index, b.step.index);
  EXPECT_EQ(a.step.stage, b.step.stage);
  EXPECT_EQ(a.step.q_tile, b.step.q_tile);
  EXPECT_EQ(a.step.kv_tile, b.step.kv_tile);
  EXPECT_EQ(a.step.nonfinite.total(), b.step.nonfinite.total());
  EXPECT_EQ(a.step.new_nonfinite, b.step.new_nonfinite);
  EXPECT_EQ(a.tile_rows, b.tile_rows);
  EXPECT_EQ(a.tile_cols, b.tile_cols);
  EXPECT_EQ(a.kv_tiles_done, b.kv_tiles_done);
  EXPECT_EQ(a.masked, b.masked);
  for (const auto& [x, y] : {std::pair{&a.s, &b.s},
                             {&a.p, &b.p},
                             {&a.dp, &b.dp},
                             {&a.ds, &b.ds},
                             {&a.d, &b.d},
                             {&a.dq_acc, &b.dq_acc},
                             {&a.dk_acc, &b.dk_acc},
                             {&a.dv_acc, &b.dv_acc},
                             {&a.dk, &b.dk},
                             {&a.dv, &b.dv},
                             {&a.dq, &b.dq}}) {
    EXPECT_TRUE(same_bits(*x, *y));
  }
}

TEST(Stepper, step_back_then_forward_and_seeks_reproduce_the_same_state) {
  CaseConfig c;
  c.sq = c.sk = 300;
  c.d = 32;
  c.causal = true;
  c.precision = Precision::f16;
  const TestCase t = make_case(c);
  const CpuAttnResult r = run_cpu(t, Mode::fused);
  BackwardStepper stepper = make_stepper(t, r, 0, 0);
  // 5 x 5 tiles, causal: kv tile 0 runs steps 1..41 (5 q tiles + store), kv tile 1 42..74.
  ASSERT_EQ(stepper.size(), 1 + 15 * 8 + 5 + 1);
  stepper.seek(70);
  const StepperState at70 = stepper.current();
  ASSERT_EQ(stepper.position(), 70);
  ASSERT_TRUE(stepper.step_back());
  EXPECT_EQ(stepper.position(), 69);
  EXPECT_EQ(stepper.current().step.index, 68);
  ASSERT_TRUE(stepper.step_forward());
  expect_same_state(stepper.current(), at70);
  stepper.seek(3);  // back across a kv tile boundary: replayed from the start
  stepper.seek(70);
  expect_same_state(stepper.current(), at70);
  stepper.seek(0);
  EXPECT_EQ(stepper.current().step.stage, StepStage::start);
  EXPECT_FALSE(stepper.step_back());
}

// v_100 = 6e36 in all 64 dims and dO = 1: O and D stay finite, but dP_i100 = 64 * 6e36
// overflows fp32 first at (q tile 0, kv tile 1), then dS of that tile.
TEST(Stepper, run_to_next_nonfinite_stops_at_compute_dp_of_kv_tile_1_then_compute_ds) {
  CaseConfig c;
  c.sq = c.sk = 200;
  c.d = 64;
  TestCase t = make_case(c);
  for (int64_t e = 0; e < c.d; ++e) t.v[at(100 * c.d + e)] = 6e36f;
  std::fill(t.dout.begin(), t.dout.end(), 1.0f);
  const CpuAttnResult r = run_cpu(t, Mode::fused);
  ASSERT_EQ(count_nonfinite(r.o) + count_nonfinite(r.d), 0);
  BackwardStepper stepper = make_stepper(t, r, 0, 0);
  ASSERT_TRUE(stepper.run_to_next_nonfinite());
  StepInfo step = stepper.current().step;
  EXPECT_EQ(step.stage, StepStage::compute_dp);
  EXPECT_STREQ(step_stage_name(step.stage), "compute_dp");
  EXPECT_EQ(step.q_tile, 0);
  EXPECT_EQ(step.kv_tile, 1);
  EXPECT_EQ(step.nonfinite.pos_inf, 64);  // column 100 of the 64 rows
  EXPECT_EQ(step.new_nonfinite, 64);
  const std::vector<float>& dp = stepper.current().dp;
  for (int64_t i = 0; i < 64; ++i) EXPECT_TRUE(std::isinf(dp[at(i * 64 + 36)]));
  ASSERT_TRUE(stepper.run_to_next_nonfinite());
  step = stepper.current().step;
  EXPECT_EQ(step.stage, StepStage::compute_ds);
  EXPECT_EQ(step.kv_tile, 1);
}

TEST(Stepper, plan_skips_causally_hidden_tiles_and_describes_steps) {
  CaseConfig c;
  c.sq = c.sk = 200;  // 4 x 4 tiles, 10 on or below the diagonal
  c.causal = true;
  const TestCase t = make_case(c);
  const CpuAttnResult r = run_cpu(t, Mode::fused);
  const BackwardStepper stepper = make_stepper(t, r, 0, 0);
  EXPECT_EQ(stepper.size(), 1 + 10 * 8 + 4 + 1);
  const StepInfo first = stepper.describe(1);
  EXPECT_EQ(first.stage, StepStage::score_tile);
  EXPECT_EQ(first.q_tile, 0);
  EXPECT_EQ(first.kv_tile, 0);
  EXPECT_EQ(first.window.row_end, 64);
  EXPECT_EQ(first.window.col_end, 64);
  const StepInfo store = stepper.describe(1 + 4 * 8);  // kv tile 0 has 4 q tiles
  EXPECT_EQ(store.stage, StepStage::store_dk_dv);
  EXPECT_STREQ(step_stage_name(store.stage), "backward_postprocess");
  EXPECT_EQ(store.window.col_begin, 0);
  EXPECT_EQ(store.window.col_end, 64);
  const StepInfo last = stepper.describe(stepper.size() - 1);
  EXPECT_EQ(last.stage, StepStage::store_dq);
  EXPECT_EQ(last.window.row_end, 200);
}

// Every tile's S, P, dP, dS in the stepper equal the head matrices' (3 x 3 tiles of 130 x 150).
void expect_tiles_equal_head_matrices(const CaseConfig& c) {
  const TestCase t = make_case(c);
  const CpuAttnResult r = run_cpu(t, Mode::fused);
  const HeadMatrices hm = cpu_head_matrices(params_of(t), {}, inputs_of(t), 0, 0);
  BackwardStepper stepper = make_stepper(t, r, 0, 0);
  int64_t tiles = 0;
  while (stepper.step_forward()) {
    const StepperState& st = stepper.current();
    if (st.step.stage != StepStage::compute_ds) continue;
    ++tiles;
    for (int64_t i = 0; i < st.tile_rows; ++i) {
      const size_t from = at((st.step.window.row_begin + i) * hm.cols + st.step.window.col_begin);
      const size_t to = at(i * st.tile_cols);
      for (const auto& [tile, full] :
           {std::pair{&st.s, &hm.s}, {&st.p, &hm.p}, {&st.dp, &hm.dp}, {&st.ds, &hm.ds}}) {
        ASSERT_EQ(
            std::memcmp(tile->data() + to, full->data() + from, at(st.tile_cols) * sizeof(float)),
            0);
      }
    }
  }
  EXPECT_EQ(tiles, 3 * 3);
}

CaseConfig tiles_130x150_bf16() {
  CaseConfig c;
  c.sq = 130;
  c.sk = 150;
  c.d = 32;
  c.mask = MaskKind::broadcast;
  c.precision = Precision::bf16;
  return c;
}

TEST(Stepper, tile_intermediates_equal_the_head_matrices_bit_for_bit) {
  expect_tiles_equal_head_matrices(tiles_130x150_bf16());
}

TEST(Stepper, tile_intermediates_equal_the_head_matrices_with_dropout_and_from_lse_bf16) {
  CaseConfig c = tiles_130x150_bf16();
  c.dropout = true;
  c.dropout_p = 0.4;
  c.backward_p = BackwardP::from_lse;
  expect_tiles_equal_head_matrices(c);
}

TEST(Stepper, unfused_mode_and_missing_forward_throw_invalid_argument) {
  const TestCase t = make_case({});
  const CpuAttnResult r = run_cpu(t, Mode::fused);
  CpuAttnOptions unfused;
  unfused.mode = Mode::unfused;
  const CpuForwardView fwd{r.o.data(), r.m.data(), r.l.data()};
  EXPECT_THROW(BackwardStepper(params_of(t), unfused, inputs_of(t), fwd, 0, 0),
               std::invalid_argument);
  EXPECT_THROW(BackwardStepper(params_of(t), {}, inputs_of(t), {}, 0, 0), std::invalid_argument);
  EXPECT_THROW(BackwardStepper(params_of(t), {}, inputs_of(t), fwd, 0, 1), std::invalid_argument);
}

}  // namespace
}  // namespace attnscope::test
