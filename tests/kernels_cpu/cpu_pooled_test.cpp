// Full-resolution and pooled S, P, dP, dS of one head (kernels/cpu/head_matrices.h): the
// matrices are the kernel's own (row max = the forward's m bit for bit, tile stats of the
// trace reproduced exactly, close to the fp64 reference), windows crop exactly, and pooling
// streamed by tiles equals pooling the full-resolution matrices, NaN kept visible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/cpu/head_matrices.h"

namespace attnscope::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

size_t at(int64_t i) {
  return static_cast<size_t>(i);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

HeadMatrices matrices(const TestCase& t, Mode mode, MatrixWindow window = {}, int threads = 2) {
  CpuAttnOptions o;
  o.mode = mode;
  o.threads = threads;
  return cpu_head_matrices(params_of(t), o, inputs_of(t), 1, 1, window);
}

PooledHeadMatrices pooled(const TestCase& t, Mode mode, int64_t rows, int64_t cols,
                          MatrixWindow window = {}, int threads = 2) {
  CpuAttnOptions o;
  o.mode = mode;
  o.threads = threads;
  return cpu_pooled_matrices(params_of(t), o, inputs_of(t), 1, 1, rows, cols, window);
}

TEST(HeadMatrices, row_max_of_s_is_the_forwards_m_bit_for_bit_fused_and_unfused_f16) {
  const TestCase t = messy_pooling_case(Precision::f16);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    const CpuAttnResult r = run_cpu(t, mode);
    const HeadMatrices hm = matrices(t, mode);
    for (int64_t i = 0; i < hm.rows; ++i) {
      float m = -std::numeric_limits<float>::infinity();
      bool nan = false;
      for (int64_t j = 0; j < hm.cols; ++j) {
        const float s = hm.s[at(i * hm.cols + j)];
        nan |= std::isnan(s);
        m = std::max(m, s);
      }
      const float want = r.m[at(3 * 150 + i)];
      if (nan) {
        EXPECT_TRUE(std::isnan(want)) << "row " << i;
      } else {
        EXPECT_EQ(m, want) << "row " << i;
      }
    }
  }
}

// The trace's per-tile stats come from the kernel's own tiles; the matrices reproduce them.
TEST(HeadMatrices, reproduce_the_traced_backward_tile_stats_exactly_fused_bf16_and_unfused_f16) {
  for (const auto& [mode, precision] :
       {std::pair{Mode::fused, Precision::bf16}, std::pair{Mode::unfused, Precision::f16}}) {
    const TestCase t = messy_pooling_case(precision);
    CpuTrace tr;
    run_cpu_traced(t, mode, &tr);
    const HeadMatrices hm = matrices(t, mode);
    for (int64_t qt = 0; qt < tr.q_tiles; ++qt) {
      for (int64_t kt = 0; kt < tr.kv_tiles; ++kt) {
        const TileStats& ts = tr.backward.tiles[at(tr.tile_index(1, 1, qt, kt))];
        if (!ts.computed) continue;
        float max_abs = 0;
        int32_t masked = 0;
        NonfiniteCount p, dp, ds;
        const auto add = [](NonfiniteCount& n, float v) {
          n.nan += std::isnan(v);
          n.pos_inf += v == std::numeric_limits<float>::infinity();
          n.neg_inf += v == -std::numeric_limits<float>::infinity();
        };
        for (int64_t i = qt * 64; i < std::min<int64_t>(hm.rows, qt * 64 + 64); ++i) {
          for (int64_t j = kt * 64; j < std::min<int64_t>(hm.cols, kt * 64 + 64); ++j) {
            const size_t e = at(i * hm.cols + j);
            masked += hm.masked[e] != kEntryVisible;
            if (hm.masked[e] == kEntryVisible && std::isfinite(hm.s[e])) {
              max_abs = std::max(max_abs, std::abs(hm.s[e]));
            }
            add(p, hm.p[e]);
            add(dp, hm.dp[e]);
            add(ds, hm.ds[e]);
          }
        }
        SCOPED_TRACE(testing::Message() << "tile " << qt << "," << kt);
        EXPECT_EQ(ts.max_abs_s, max_abs);
        EXPECT_EQ(ts.masked, masked);
        for (const auto& [got, want] : {std::pair{ts.p, p}, {ts.dp, dp}, {ts.ds, ds}}) {
          EXPECT_EQ(got.nan, want.nan);
          EXPECT_EQ(got.pos_inf, want.pos_inf);
          EXPECT_EQ(got.neg_inf, want.neg_inf);
        }
      }
    }
  }
}

TEST(HeadMatrices, fused_f32_close_to_fp64_reference_s_p_dp_ds) {
  CaseConfig c;
  c.sq = 100;
  c.sk = 130;
  c.d = 32;
  c.causal = true;
  const TestCase t = make_case(c);
  const ReferenceTrace ref = run_reference(t);
  CpuAttnOptions o;
  const HeadMatrices hm = cpu_head_matrices(params_of(t), o, inputs_of(t), 0, 0);
  for (const auto& [got, want] :
       {std::pair{&hm.s, &ref.s}, {&hm.p, &ref.p}, {&hm.dp, &ref.dp}, {&hm.ds, &ref.ds}}) {
    EXPECT_EQ(nonfinite_mismatches(*got, *want), 0);
    EXPECT_LE(max_abs_diff(*got, *want), 2e-6 * std::max(1.0, max_abs(*want)));
  }
}

// With dropout the matrices hold the undropped P and the dP that enters dS, Z o (dO V^T), as
// the reference's p and dp; fused P from the LSE still matches the reference's P to rounding.
TEST(HeadMatrices, f32_close_to_fp64_reference_with_dropout_and_from_lse_fused_unfused) {
  CaseConfig c;
  c.sq = 100;
  c.sk = 130;
  c.d = 32;
  c.causal = true;
  c.dropout = true;
  c.dropout_p = 0.3;
  c.backward_p = BackwardP::from_lse;
  const TestCase t = make_case(c);
  const ReferenceTrace ref = run_reference(t);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    CpuAttnOptions o;
    o.mode = mode;
    const HeadMatrices hm = cpu_head_matrices(params_of(t), o, inputs_of(t), 0, 0);
    for (const auto& [got, want] :
         {std::pair{&hm.s, &ref.s}, {&hm.p, &ref.p}, {&hm.dp, &ref.dp}, {&hm.ds, &ref.ds}}) {
      EXPECT_EQ(nonfinite_mismatches(*got, *want), 0);
      EXPECT_LE(max_abs_diff(*got, *want), 2e-6 * std::max(1.0, max_abs(*want)));
    }
    int64_t dropped_visible = 0;
    for (size_t e = 0; e < hm.dp.size(); ++e) {
      if (t.keep[e] == 0 && hm.masked[e] == kEntryVisible) {
        ++dropped_visible;
        EXPECT_EQ(hm.dp[e], 0.0f) << e;
        EXPECT_GT(hm.p[e], 0.0f) << e;
      }
    }
    EXPECT_GT(dropped_visible, 1000);
  }
}

TEST(HeadMatrices, window_is_the_exact_crop_of_the_full_matrices) {
  const TestCase t = messy_pooling_case(Precision::f16);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    const HeadMatrices full = matrices(t, mode);
    const MatrixWindow w{65, 140, 30, 199};
    const HeadMatrices part = matrices(t, mode, w, 3);
    ASSERT_EQ(part.rows, 75);
    ASSERT_EQ(part.cols, 169);
    for (int64_t i = 0; i < part.rows; ++i) {
      for (int64_t j = 0; j < part.cols; ++j) {
        const size_t a = at(i * part.cols + j), f = at((i + 65) * full.cols + j + 30);
        for (const auto& [x, y] : {std::pair{&part.s, &full.s},
                                   {&part.p, &full.p},
                                   {&part.dp, &full.dp},
                                   {&part.ds, &full.ds}}) {
          ASSERT_EQ(std::memcmp(&(*x)[a], &(*y)[f], sizeof(float)), 0) << i << "," << j;
        }
        ASSERT_EQ(part.masked[a], full.masked[f]);
      }
    }
  }
}

// Pools a full-resolution window matrix with the rules of PooledMatrix.
PooledMatrix pool(const std::vector<float>& x, const HeadMatrices& hm,
                  const PooledHeadMatrices& shape, bool is_s) {
  PooledMatrix m;
  const size_t n = at(shape.rows * shape.cols);
  m.max.assign(n, -INFINITY);
  m.min.assign(n, INFINITY);
  m.mean.assign(n, 0);
  for (auto* c : {&m.finite, &m.nan, &m.pos_inf, &m.neg_inf, &m.masked}) c->assign(n, 0);
  std::vector<double> sum(n, 0);
  for (int64_t r = 0; r < shape.rows; ++r) {
    for (int64_t c = 0; c < shape.cols; ++c) {
      const size_t cell = at(r * shape.cols + c);
      for (int64_t i = shape.row_edges[at(r)]; i < shape.row_edges[at(r + 1)]; ++i) {
        for (int64_t j = shape.col_edges[at(c)]; j < shape.col_edges[at(c + 1)]; ++j) {
          const size_t e = at((i - hm.window.row_begin) * hm.cols + (j - hm.window.col_begin));
          const float v = x[e];
          if (std::isnan(v)) {
            ++m.nan[cell];
          } else if (hm.masked[e] != kEntryVisible && (is_s || std::isfinite(v))) {
            ++m.masked[cell];
          } else if (std::isinf(v)) {
            ++(v > 0 ? m.pos_inf : m.neg_inf)[cell];
          } else {
            m.max[cell] = std::max(m.max[cell], v);
            m.min[cell] = std::min(m.min[cell], v);
            sum[cell] += v;
            ++m.finite[cell];
          }
        }
      }
      if (m.finite[cell] == 0) m.max[cell] = m.min[cell] = m.mean[cell] = NAN;
      if (m.finite[cell] > 0) m.mean[cell] = static_cast<float>(sum[cell] / m.finite[cell]);
    }
  }
  return m;
}

void expect_same_pool(const PooledMatrix& got, const PooledMatrix& want, const char* what) {
  EXPECT_EQ(got.finite, want.finite) << what;
  EXPECT_EQ(got.nan, want.nan) << what;
  EXPECT_EQ(got.pos_inf, want.pos_inf) << what;
  EXPECT_EQ(got.neg_inf, want.neg_inf) << what;
  EXPECT_EQ(got.masked, want.masked) << what;
  EXPECT_TRUE(same_bits(got.max, want.max)) << what;
  EXPECT_TRUE(same_bits(got.min, want.min)) << what;
  ASSERT_EQ(got.mean.size(), want.mean.size());
  for (size_t e = 0; e < got.mean.size(); ++e) {
    if (std::isnan(want.mean[e])) {
      EXPECT_TRUE(std::isnan(got.mean[e])) << what << " cell " << e;
    } else {
      EXPECT_NEAR(got.mean[e], want.mean[e], 1e-6 * std::max(1.0f, std::abs(want.mean[e])))
          << what << " cell " << e;
    }
  }
}

TEST(Pooled, equals_pooling_the_full_resolution_matrices_sizes_windows_fused_unfused) {
  struct Shape {
    int64_t rows, cols;
    MatrixWindow window;
  };
  const Shape shapes[] = {{7, 5, {}},
                          {1, 1, {}},
                          {150, 200, {}},
                          {400, 900, {}},
                          {13, 29, {3, 149, 64, 130}},
                          {64, 64, {64, 128, 0, 64}}};
  for (Precision precision : {Precision::f32, Precision::f16}) {
    const TestCase t = messy_pooling_case(precision);
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      for (const Shape& sh : shapes) {
        SCOPED_TRACE(testing::Message()
                     << sh.rows << "x" << sh.cols << " mode " << static_cast<int>(mode));
        const PooledHeadMatrices pm = pooled(t, mode, sh.rows, sh.cols, sh.window);
        const HeadMatrices hm = matrices(t, mode, sh.window);
        EXPECT_EQ(pm.rows, std::min(sh.rows, hm.rows));
        EXPECT_EQ(pm.cols, std::min(sh.cols, hm.cols));
        expect_same_pool(pm.s, pool(hm.s, hm, pm, true), "s");
        expect_same_pool(pm.p, pool(hm.p, hm, pm, false), "p");
        expect_same_pool(pm.dp, pool(hm.dp, hm, pm, false), "dp");
        expect_same_pool(pm.ds, pool(hm.ds, hm, pm, false), "ds");
        if (sh.rows == 7) {  // the case exercises every class
          const auto total = [](const std::vector<int32_t>& x) {
            return std::accumulate(x.begin(), x.end(), int64_t{0});
          };
          EXPECT_GT(total(pm.s.nan), 0);
          EXPECT_GT(total(pm.s.masked), 0);
          EXPECT_GT(total(pm.p.nan), 0);
          EXPECT_GT(total(pm.ds.finite), 0);
        }
      }
    }
  }
}

TEST(Pooled, single_nan_score_stays_visible_in_a_1x1_pool_s_only_selection) {
  CaseConfig c;
  c.sq = 300;
  c.sk = 500;
  c.d = 16;
  c.bias = true;
  TestCase t = make_case(c);
  t.bias[at(123 * c.sk + 456)] = NAN;
  MatrixSelection s_only;
  s_only.p = s_only.dp = s_only.ds = false;
  const PooledHeadMatrices pm =
      cpu_pooled_matrices(params_of(t), {}, inputs_of(t), 0, 0, 1, 1, {}, s_only);
  EXPECT_EQ(pm.s.nan[0], 1);
  EXPECT_EQ(pm.s.finite[0], c.sq * c.sk - 1);
  EXPECT_TRUE(pm.p.finite.empty() && pm.ds.nan.empty());
}

TEST(Pooled, thread_count_independent_bit_identical) {
  const TestCase t = messy_pooling_case(Precision::bf16);
  const PooledHeadMatrices one = pooled(t, Mode::fused, 37, 23, {}, 1);
  const PooledHeadMatrices three = pooled(t, Mode::fused, 37, 23, {}, 3);
  for (const auto& [a, b] : {std::pair{&one.p, &three.p}, {&one.ds, &three.ds}}) {
    EXPECT_TRUE(same_bits(a->mean, b->mean));
    EXPECT_TRUE(same_bits(a->max, b->max));
    EXPECT_EQ(a->nan, b->nan);
  }
}

// m, l, D handed over from a cpu_attention run replace the recomputed forward bit for bit, in
// every fused precision, for the whole head, a window and the pooled matrices.
TEST(Pooled, forward_rows_from_cpu_attention_give_identical_matrices_fused_f32_f16_bf16) {
  for (Precision precision : {Precision::f32, Precision::f16, Precision::bf16}) {
    SCOPED_TRACE(testing::Message() << "precision " << static_cast<int>(precision));
    const TestCase t = messy_pooling_case(precision);
    const CpuAttnResult r = run_cpu(t, Mode::fused);
    const ForwardRows rows{r.m.data(), r.l.data(), r.d.data()};
    CpuAttnOptions o;
    o.threads = 2;
    for (const MatrixWindow& w : {MatrixWindow{}, MatrixWindow{65, 140, 30, 199}}) {
      const HeadMatrices want = matrices(t, Mode::fused, w);
      const HeadMatrices got = cpu_head_matrices(params_of(t), o, inputs_of(t), 1, 1, w, {}, &rows);
      EXPECT_TRUE(same_bits(got.s, want.s));
      EXPECT_TRUE(same_bits(got.p, want.p));
      EXPECT_TRUE(same_bits(got.dp, want.dp));
      EXPECT_TRUE(same_bits(got.ds, want.ds));
      EXPECT_EQ(got.masked, want.masked);
    }
    const PooledHeadMatrices want = pooled(t, Mode::fused, 37, 23);
    const PooledHeadMatrices got =
        cpu_pooled_matrices(params_of(t), o, inputs_of(t), 1, 1, 37, 23, {}, {}, &rows);
    for (const auto& [a, b] : {std::pair{&got.p, &want.p}, {&got.ds, &want.ds}}) {
      EXPECT_TRUE(same_bits(a->mean, b->mean));
      EXPECT_TRUE(same_bits(a->max, b->max));
      EXPECT_TRUE(same_bits(a->min, b->min));
      EXPECT_EQ(a->nan, b->nan);
      EXPECT_EQ(a->finite, b->finite);
    }
    // A NaN row (q_70 holds a NaN) must stay NaN in P with the handed-over rows.
    int32_t nan_p = 0;
    for (int32_t n : got.p.nan) nan_p += n;
    EXPECT_GT(nan_p, 0);
  }
}

TEST(Pooled, bad_window_or_empty_selection_throws_invalid_argument) {
  const TestCase t = messy_pooling_case(Precision::f32);
  EXPECT_THROW(pooled(t, Mode::fused, 4, 4, {10, 10, 0, -1}), std::invalid_argument);
  EXPECT_THROW(pooled(t, Mode::fused, 4, 4, {0, 151, 0, -1}), std::invalid_argument);
  EXPECT_THROW(cpu_pooled_matrices(params_of(t), {}, inputs_of(t), 0, 0, 4, 4, {},
                                   {false, false, false, false}),
               std::invalid_argument);
  EXPECT_THROW(cpu_head_matrices(params_of(t), {}, inputs_of(t), 2, 0), std::invalid_argument);
}

}  // namespace
}  // namespace attnscope::test
