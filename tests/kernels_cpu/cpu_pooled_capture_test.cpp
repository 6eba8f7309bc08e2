// Pooled S, P, dP, dS gathered by the backward on the way (CpuAttnOptions::pooled), and S by the
// fused forward (pooled_s), equal the recomputation cpu_pooled_matrices bit for bit in both
// modes and every precision, for whole heads, windows and cells that straddle tiles, whatever
// the thread count, and leave the kernel's outputs untouched.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/cpu/head_matrices.h"

namespace attnscope::test {
namespace {

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

void expect_identical(const PooledHeadMatrices& got, const PooledHeadMatrices& want) {
  EXPECT_EQ(got.rows, want.rows);
  EXPECT_EQ(got.cols, want.cols);
  EXPECT_EQ(got.row_edges, want.row_edges);
  EXPECT_EQ(got.col_edges, want.col_edges);
  const std::pair<const PooledMatrix*, const PooledMatrix*> mats[] = {
      {&got.s, &want.s}, {&got.p, &want.p}, {&got.dp, &want.dp}, {&got.ds, &want.ds}};
  const char* names[] = {"S", "P", "dP", "dS"};
  for (int k = 0; k < 4; ++k) {
    const PooledMatrix& a = *mats[k].first;
    const PooledMatrix& b = *mats[k].second;
    SCOPED_TRACE(names[k]);
    EXPECT_TRUE(same_bits(a.max, b.max));
    EXPECT_TRUE(same_bits(a.min, b.min));
    EXPECT_TRUE(same_bits(a.mean, b.mean));
    EXPECT_EQ(a.finite, b.finite);
    EXPECT_EQ(a.nan, b.nan);
    EXPECT_EQ(a.pos_inf, b.pos_inf);
    EXPECT_EQ(a.neg_inf, b.neg_inf);
    EXPECT_EQ(a.masked, b.masked);
    EXPECT_EQ(a.cls, b.cls);
    EXPECT_EQ(a.totals.finite, b.totals.finite);
    EXPECT_EQ(a.totals.nan, b.totals.nan);
    EXPECT_EQ(a.totals.pos_inf, b.totals.pos_inf);
    EXPECT_EQ(a.totals.neg_inf, b.totals.neg_inf);
    EXPECT_EQ(a.totals.masked, b.totals.masked);
  }
}

int64_t sum(const std::vector<int32_t>& x) {
  int64_t n = 0;
  for (int32_t v : x) n += v;
  return n;
}

struct Pooling {
  int64_t rows, cols;
  MatrixWindow window;
};

PooledCapture capture_of(int64_t b, int64_t h, const Pooling& pl, MatrixSelection which) {
  PooledCapture capture;
  capture.b = b;
  capture.h = h;
  capture.out_rows = pl.rows;
  capture.out_cols = pl.cols;
  capture.window = pl.window;
  capture.which = which;
  return capture;
}

// Runs cpu_attention on head (b, h) with a capture, checks the outputs equal a run without it,
// and compares the capture with cpu_pooled_matrices given that run's forward rows.
void check_capture(const TestCase& t, Mode mode, int64_t b, int64_t h, const Pooling& pl,
                   int threads, MatrixSelection which = {}) {
  CpuAttnOptions o;
  o.mode = mode;
  o.threads = threads;
  PooledCapture capture = capture_of(b, h, pl, which);
  CpuAttnOptions with = o;
  with.pooled = &capture;
  const CpuAttnResult r = cpu_attention(params_of(t), with, inputs_of(t));
  const CpuAttnResult plain = cpu_attention(params_of(t), o, inputs_of(t));
  EXPECT_TRUE(same_bits(r.o, plain.o));
  EXPECT_TRUE(same_bits(r.dq, plain.dq));
  EXPECT_TRUE(same_bits(r.dk, plain.dk));
  EXPECT_TRUE(same_bits(r.dv, plain.dv));
  const ForwardRows rows{r.m.data(), r.l.data(), r.d.data()};
  const PooledHeadMatrices want = cpu_pooled_matrices(params_of(t), o, inputs_of(t), b, h, pl.rows,
                                                      pl.cols, pl.window, which, &rows);
  expect_identical(capture.result, want);
}

// The fused forward of head (b, h) with an S capture: outputs as without it, S as recomputed.
void check_forward_capture(const TestCase& t, int64_t b, int64_t h, const Pooling& pl,
                           int threads) {
  CpuAttnOptions o;
  o.threads = threads;
  PooledCapture capture = capture_of(b, h, pl, {true, false, false, false});
  CpuAttnOptions with = o;
  with.pooled_s = &capture;
  CpuAttnResult r, plain;
  cpu_attention_forward(params_of(t), with, inputs_of(t), r);
  cpu_attention_forward(params_of(t), o, inputs_of(t), plain);
  EXPECT_TRUE(same_bits(r.o, plain.o));
  EXPECT_TRUE(same_bits(r.lse, plain.lse));
  const ForwardRows rows{r.m.data(), r.l.data(), nullptr};
  const PooledHeadMatrices want = cpu_pooled_matrices(params_of(t), o, inputs_of(t), b, h, pl.rows,
                                                      pl.cols, pl.window, capture.which, &rows);
  expect_identical(capture.result, want);
  EXPECT_FALSE(capture.result.s.max.empty());
  // The statistics alone (out.o null, no P V): the same m, l, LSE and pooled S.
  PooledCapture stats_capture = capture_of(b, h, pl, {true, false, false, false});
  CpuAttnOptions stats = o;
  stats.pooled_s = &stats_capture;
  std::vector<float> lse(plain.lse.size()), m(plain.m.size()), l(plain.l.size());
  cpu_attention_forward(params_of(t), stats, inputs_of(t),
                        CpuForwardOutputs{nullptr, lse.data(), m.data(), l.data()});
  EXPECT_TRUE(same_bits(lse, plain.lse));
  EXPECT_TRUE(same_bits(m, plain.m));
  EXPECT_TRUE(same_bits(l, plain.l));
  expect_identical(stats_capture.result, want);
}

TEST(PooledCapture, forward_pools_s_as_recomputed_with_or_without_o_messy_dropout_causal_threads) {
  const Pooling poolings[] = {
      {37, 23, {}}, {7, 5, {}}, {13, 29, {3, 149, 64, 130}}, {40, 40, {65, 140, 30, 199}}};
  for (Precision precision : {Precision::f32, Precision::f16, Precision::bf16}) {
    TestCase t = messy_pooling_case(precision);
    for (const Pooling& pl : poolings) {
      SCOPED_TRACE(testing::Message() << "precision " << static_cast<int>(precision) << " "
                                      << pl.rows << "x" << pl.cols);
      check_forward_capture(t, 1, 1, pl, 2);
    }
    add_dropout(t, 0.3, true, 17);
    check_forward_capture(t, 0, 1, {9, 11, {}}, 3);
  }
  // Causal Sq = Sk = 130: the forward skips the hidden tiles and computes them for the capture.
  CaseConfig c;
  c.sq = 130;
  c.sk = 130;
  c.d = 59;
  c.causal = true;
  const TestCase causal = make_case(c);
  for (const Pooling& pl : {Pooling{3, 3, {}}, Pooling{130, 130, {}}, Pooling{45, 61, {}}}) {
    for (int threads : {1, 3}) {
      SCOPED_TRACE(testing::Message() << "causal " << pl.rows << " threads " << threads);
      check_forward_capture(causal, 0, 0, pl, threads);
    }
  }
  // The unfused forward and a selection beyond S are refused.
  CpuAttnOptions o;
  PooledCapture capture;
  capture.which = {true, true, false, false};
  o.pooled_s = &capture;
  CpuAttnResult r;
  EXPECT_THROW(cpu_attention_forward(params_of(causal), o, inputs_of(causal), r),
               std::invalid_argument);
  capture.which = {true, false, false, false};
  o.mode = Mode::unfused;
  EXPECT_THROW(cpu_attention_forward(params_of(causal), o, inputs_of(causal), r),
               std::invalid_argument);
  // The statistics alone run neither unfused nor traced.
  std::vector<float> rows(static_cast<size_t>(causal.config.sq));
  const CpuForwardOutputs no_o{nullptr, rows.data(), rows.data(), rows.data()};
  o.pooled_s = nullptr;
  EXPECT_THROW(cpu_attention_forward(params_of(causal), o, inputs_of(causal), no_o),
               std::invalid_argument);
  CpuTrace trace;
  o.mode = Mode::fused;
  o.trace = &trace;
  EXPECT_THROW(cpu_attention_forward(params_of(causal), o, inputs_of(causal), no_o),
               std::invalid_argument);
}

TEST(PooledCapture, equals_recomputed_pooling_messy_case_fused_unfused_f32_f16_bf16) {
  const Pooling poolings[] = {{37, 23, {}},
                              {512, 512, {}},
                              {7, 5, {}},
                              {1, 1, {}},
                              {13, 29, {3, 149, 64, 130}},
                              {64, 64, {64, 128, 0, 64}},
                              {40, 40, {65, 140, 30, 199}}};
  for (Precision precision : {Precision::f32, Precision::f16, Precision::bf16}) {
    const TestCase t = messy_pooling_case(precision);
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      for (const Pooling& pl : poolings) {
        SCOPED_TRACE(testing::Message()
                     << "precision " << static_cast<int>(precision) << " mode "
                     << static_cast<int>(mode) << " " << pl.rows << "x" << pl.cols << " window "
                     << pl.window.row_begin << ":" << pl.window.row_end);
        check_capture(t, mode, 1, 1, pl, 2);
      }
    }
  }
}

// Dropout and P from the LSE: the capture still pools the kernel's own tiles.
TEST(PooledCapture, equals_recomputed_pooling_with_dropout_and_from_lse_fused_unfused_f32_bf16) {
  const Pooling poolings[] = {{37, 23, {}}, {1, 1, {}}, {40, 40, {65, 140, 30, 199}}};
  for (Precision precision : {Precision::f32, Precision::bf16}) {
    TestCase t = messy_pooling_case(precision);
    add_dropout(t, 0.3, true, 17);
    t.config.backward_p = BackwardP::from_lse;
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      for (const Pooling& pl : poolings) {
        SCOPED_TRACE(testing::Message()
                     << "precision " << static_cast<int>(precision) << " mode "
                     << static_cast<int>(mode) << " " << pl.rows << "x" << pl.cols);
        check_capture(t, mode, 1, 1, pl, 2);
      }
    }
  }
}

// Sq = Sk = 130 (a 2-row last tile), causal top-left: the fused backward skips the hidden
// tiles above the diagonal and computes them for the capture only. Cells of 130 / 3 rows
// straddle every tile boundary; one and three threads give the same bits.
TEST(PooledCapture, tile_breaking_s130_causal_d59_skipped_tiles_any_thread_count) {
  CaseConfig c;
  c.sq = 130;
  c.sk = 130;
  c.d = 59;
  c.causal = true;
  for (Precision precision : {Precision::f32, Precision::bf16}) {
    c.precision = precision;
    const TestCase t = make_case(c);
    for (const Pooling& pl : {Pooling{3, 3, {}}, Pooling{130, 130, {}}, Pooling{45, 61, {}},
                              Pooling{5, 9, {60, 130, 1, 129}}}) {
      for (int threads : {1, 3}) {
        SCOPED_TRACE(testing::Message() << "precision " << static_cast<int>(precision) << " "
                                        << pl.rows << "x" << pl.cols << " threads " << threads);
        check_capture(t, Mode::fused, 0, 0, pl, threads);
      }
    }
  }
}

// A selection of S and dS alone pools only those; the others stay empty.
TEST(PooledCapture, selection_s_and_ds_only_pools_those_two) {
  const TestCase t = messy_pooling_case(Precision::f16);
  const MatrixSelection s_ds{true, false, false, true};
  check_capture(t, Mode::fused, 0, 1, {9, 11, {}}, 2, s_ds);
  CpuAttnOptions o;
  PooledCapture capture;
  capture.which = s_ds;
  o.pooled = &capture;
  cpu_attention(params_of(t), o, inputs_of(t));
  EXPECT_EQ(capture.result.s.max.size(), size_t{150 * 200});  // 512 x 512 clamped
  EXPECT_TRUE(capture.result.p.max.empty());
  EXPECT_TRUE(capture.result.dp.finite.empty());
  EXPECT_EQ(capture.result.ds.nan.size(), size_t{150 * 200});
}

// Without cell counts a cell keeps max and min (the same bits) and the class of its worst
// entry; the counts survive as totals.
TEST(PooledCapture, without_cell_counts_keeps_max_min_worst_class_and_totals) {
  const TestCase t = messy_pooling_case(Precision::f16);
  MatrixSelection compact;
  compact.cell_counts = false;
  for (const Pooling& pl : {Pooling{37, 23, {}}, Pooling{13, 29, {3, 149, 64, 130}}}) {
    check_capture(t, Mode::fused, 1, 1, pl, 2, compact);
    CpuAttnOptions o;
    const PooledHeadMatrices full =
        cpu_pooled_matrices(params_of(t), o, inputs_of(t), 1, 1, pl.rows, pl.cols, pl.window);
    const PooledHeadMatrices small = cpu_pooled_matrices(params_of(t), o, inputs_of(t), 1, 1,
                                                         pl.rows, pl.cols, pl.window, compact);
    const std::pair<const PooledMatrix*, const PooledMatrix*> mats[] = {
        {&small.s, &full.s}, {&small.p, &full.p}, {&small.dp, &full.dp}, {&small.ds, &full.ds}};
    int64_t nan_cells = 0, masked_cells = 0;
    for (const auto& [a, f] : mats) {
      EXPECT_TRUE(same_bits(a->max, f->max));
      EXPECT_TRUE(same_bits(a->min, f->min));
      EXPECT_TRUE(a->finite.empty() && a->nan.empty() && a->mean.empty());
      ASSERT_EQ(a->cls.size(), f->max.size());
      for (size_t e = 0; e < a->cls.size(); ++e) {
        const CellClass want = f->nan[e] > 0       ? CellClass::nan
                               : f->pos_inf[e] > 0 ? CellClass::pos_inf
                               : f->neg_inf[e] > 0 ? CellClass::neg_inf
                               : f->finite[e] == 0 ? CellClass::masked
                                                   : CellClass::finite;
        ASSERT_EQ(a->cls[e], want) << "cell " << e;
        nan_cells += want == CellClass::nan;
        masked_cells += want == CellClass::masked;
      }
      EXPECT_EQ(a->totals.finite, sum(f->finite));
      EXPECT_EQ(a->totals.nan, sum(f->nan));
      EXPECT_EQ(a->totals.pos_inf, sum(f->pos_inf));
      EXPECT_EQ(a->totals.neg_inf, sum(f->neg_inf));
      EXPECT_EQ(a->totals.masked, sum(f->masked));
      EXPECT_EQ(f->totals.nan, sum(f->nan));  // totals come with the full cells too
    }
    EXPECT_GT(nan_cells, 0);  // the case holds NaN and all-masked cells
    EXPECT_GT(masked_cells, 0);
  }
}

TEST(PooledCapture, bad_head_or_window_throws_invalid_argument) {
  const TestCase t = messy_pooling_case(Precision::f32);
  CpuAttnOptions o;
  PooledCapture capture;
  o.pooled = &capture;
  capture.h = 2;
  EXPECT_THROW(cpu_attention(params_of(t), o, inputs_of(t)), std::invalid_argument);
  capture.h = 0;
  capture.window = {0, 151, 0, -1};
  EXPECT_THROW(cpu_attention(params_of(t), o, inputs_of(t)), std::invalid_argument);
}

}  // namespace
}  // namespace attnscope::test
