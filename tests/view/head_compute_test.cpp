// compute_head (core/view) headless: pooled and full-resolution score grids (a single NaN stays
// one NaN cell; window counts), the four error-vs-fp64 grids (exact layout, fp32 small, fp16
// visibly larger), the stage cache (a clip change reruns neither the kernels nor the score
// grids; another head reuses the converted case; cached results equal fresh ones and share
// their score grids), the memory budget (a small full-resolution window
// over the budget is pooled), pooled score grids computed per matrix (only those asked for) and
// the forward alone first (forward_only), completed from the cache bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/case_inputs.h"
#include "core/io/hdf5_dump.h"
#include "core/memory_budget.h"
#include "core/view/head_compute.h"
#include "kernels/reference/reference_attention.h"
#include "tests/view/head_result_checks.h"
#include "tests/view/smooth_case.h"

namespace attnscope::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

double maxAbsOf(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

// A synthetic single-head case [1, 1, n, d] with one NaN in the bias at (row, col).
CaseData singleNanCase(int64_t n, int64_t d, int64_t row, int64_t col) {
  CaseData c;
  c.info.path = "/synthetic";
  c.info.dims = {1, 1, 1, n, n, d, d};
  c.info.config.dtype = "float32";
  std::vector<float> x(static_cast<size_t>(n * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  for (const char* name : {"q", "k", "v", "do"}) {
    c.tensors[name] = HostTensor::from_float(DType::f32, {1, 1, n, d}, x);
  }
  std::vector<float> bias(static_cast<size_t>(n * n), 0.0f);
  bias[static_cast<size_t>(row * n + col)] = kNaN;
  c.tensors["bias"] = HostTensor::from_float(DType::f32, {1, 1, n, n}, bias);
  return c;
}

TEST(HeadCompute, pooled_grid_keeps_a_single_nan) {
  const CaseData c = singleNanCase(300, 16, 123, 217);
  HeadRequest req;
  req.out_rows = 32;
  req.out_cols = 24;
  const Result<HeadResult> r = compute_head(c, req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const MatrixGrid& s = *r->s;
  ASSERT_TRUE(s.pooled);
  ASSERT_EQ(s.rows, int64_t{32});
  ASSERT_EQ(s.cols, int64_t{24});
  ASSERT_EQ(s.counts.nan, int64_t{1});
  ASSERT_EQ(std::count(s.cls.begin(), s.cls.end(), CellClass::nan), std::ptrdiff_t{1});
  const int64_t cell = s.cell_of(123, 217);
  ASSERT_TRUE(cell >= 0);
  ASSERT_EQ(s.cls[static_cast<size_t>(cell)], CellClass::nan);
  const CellReadout readout = s.readout(123, 217);
  ASSERT_TRUE(readout.pooled);
  ASSERT_TRUE(readout.block.row_begin <= 123 && 123 < readout.block.row_end);
  ASSERT_TRUE(readout.block.col_begin <= 217 && 217 < readout.block.col_end);
  // The NaN score poisons its softmax row: P is NaN across row 123 (all 300 keys).
  ASSERT_EQ(r->p->counts.nan, int64_t{300});
  ASSERT_EQ(r->o.rows, int64_t{300});
  ASSERT_EQ(r->m.size(), size_t{300});
}

TEST(HeadCompute, full_window_matches_pooled_counts) {
  const CaseData c = singleNanCase(300, 16, 123, 217);
  HeadRequest req;
  req.window = MatrixWindow{100, 140, 200, 260};
  const Result<HeadResult> r = compute_head(c, req);
  ASSERT_TRUE(r.ok());
  const MatrixGrid& s = *r->s;
  ASSERT_TRUE(!s.pooled);
  ASSERT_TRUE(!s.complete());
  ASSERT_EQ(s.rows, int64_t{40});
  ASSERT_EQ(s.cols, int64_t{60});
  ASSERT_EQ(s.counts.nan, int64_t{1});
  ASSERT_TRUE(std::isnan(s.readout(123, 217).value));
  ASSERT_EQ(s.readout(99, 217).row, int64_t{-1});  // outside the window

  const Result<DumpReader> dump = DumpReader::open(ATTNSCOPE_SAMPLE);
  ASSERT_TRUE(dump.ok());
  const Result<CaseData> overflow = dump->load("/fp16_score_overflow");
  ASSERT_TRUE(overflow.ok());
  HeadRequest fp16;
  fp16.run.precision = Precision::f16;
  fp16.run.modes = {Mode::unfused};
  fp16.head = 3;
  const Result<HeadResult> h3 = compute_head(*overflow, fp16);
  ASSERT_TRUE(h3.ok());
  ASSERT_TRUE(h3->s->complete());
  ASSERT_TRUE(h3->s->counts.nonfinite() > 0);
  fp16.head = 0;
  const Result<HeadResult> h0 = compute_head(*overflow, fp16);
  ASSERT_TRUE(h0.ok());
  ASSERT_EQ(h0->s->counts.nonfinite(), int64_t{0});
  fp16.head = 4;
  ASSERT_TRUE(!compute_head(*overflow, fp16).ok());  // H = 4
}

// BERT's extended attention mask: padded keys get an additive -10000, finite. Those positions
// count as masked (a bias at or below kBiasSentinel), so S's values and colour range are the
// real scores, not the padding, in both kernels, pooled or not.
TEST(HeadCompute, bert_padding_bias_counts_as_masked) {
  constexpr int64_t n = 96, d = 16, kPadded = 32;
  CaseData c = singleNanCase(n, d, 0, 0);
  std::vector<float> bias(static_cast<size_t>(n * n), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = n - kPadded; j < n; ++j) bias[static_cast<size_t>(i * n + j)] = -10000.0f;
  }
  c.tensors["bias"] = HostTensor::from_float(DType::f32, {1, 1, n, n}, bias);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    for (int64_t cells : {int64_t{512}, int64_t{24}}) {  // full resolution, pooled
      HeadRequest req;
      req.run.modes = {mode};
      req.out_rows = req.out_cols = cells;
      const Result<HeadResult> r = compute_head(c, req);
      ASSERT_TRUE(r.ok()) << r.error().message;
      const MatrixGrid& s = *r->s;
      ASSERT_EQ(s.counts.masked, n * kPadded) << mode_name(mode) << " " << cells;
      ASSERT_EQ(s.counts.finite, n * (n - kPadded));
      double lowest = 0;
      for (float v : s.value) {
        if (std::isfinite(v)) lowest = std::min(lowest, static_cast<double>(v));
      }
      ASSERT_GT(lowest, -100.0) << mode_name(mode) << " " << cells;  // no -10000 in the range
    }
  }
}

TEST(HeadCompute, error_grids_for_o_dq_dk_dv) {
  const CaseData c = smoothCase();
  RunChoice settings;
  settings.precision = Precision::f32;
  Result<CaseInputs> in = make_case_inputs(c, settings);
  ASSERT_TRUE(in.ok());
  const ReferenceTrace ref =
      reference_attention(in->params, in->q.data(), in->k.data(), in->v.data(), in->dout.data());
  HeadRequest req;
  req.reference = true;
  req.run.precision = Precision::f32;
  const Result<HeadResult> f32 = compute_head(c, req);
  ASSERT_TRUE(f32.ok());
  struct Expect {
    HeadView view;
    const MatrixGrid& value;
    const std::vector<double>& ref;
    int64_t rows;
  };
  const Expect expect[] = {{HeadView::o_err, f32->o, ref.o, 40},
                           {HeadView::dq_err, f32->dq, ref.dq, 40},
                           {HeadView::dk_err, f32->dk, ref.dk, 56},
                           {HeadView::dv_err, f32->dv, ref.dv, 56}};
  for (const Expect& e : expect) {
    const MatrixGrid* err = &f32->grid(e.view);
    ASSERT_TRUE(!err->empty()) << head_view_name(e.view);
    ASSERT_EQ(err->rows, e.rows);
    ASSERT_EQ(err->cols, int64_t{16});
    // Element (i, c) is the kernel's value minus the reference's at the same place.
    for (size_t k = 0; k < err->raw.size(); ++k) {
      ASSERT_EQ(err->raw[k], static_cast<float>(e.value.raw[k] - e.ref[k]));
    }
    ASSERT_TRUE(maxAbsOf(err->raw) <= 1e-5 * maxAbsOf(e.value.raw)) << head_view_name(e.view);
  }
  // fp16 storage: the gradients' error is visible, still within a few fp16 ulps of the values.
  req.run.precision = Precision::f16;
  const Result<HeadResult> f16 = compute_head(c, req);
  ASSERT_TRUE(f16.ok());
  for (const auto& [error_view, view] :
       {std::pair{HeadView::dk_err, HeadView::dk}, std::pair{HeadView::dv_err, HeadView::dv}}) {
    const double err = maxAbsOf(f16->grid(error_view).raw);
    const double err32 = maxAbsOf(f32->grid(error_view).raw);
    const double scale = maxAbsOf(f16->grid(view).raw);
    ASSERT_TRUE(err > 10 * err32 && err > 1e-4 * scale) << head_view_name(error_view);
    ASSERT_TRUE(err < 1e-2 * scale) << head_view_name(error_view);
  }
  // Without request.reference the error grids stay empty.
  req.reference = false;
  const Result<HeadResult> none = compute_head(c, req);
  ASSERT_TRUE(none.ok() && none->dk_err.empty() && none->dv_err.empty());
}

TEST(HeadCompute, cache_reruns_only_later_stages) {
  const CaseData c = smoothCase();
  HeadCache cache;
  HeadRequest req;
  req.reference = true;
  const Result<HeadResult> first = compute_head(c, req, &cache);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(ran(*first, "cpu fwd+bwd") && ran(*first, "score grids") && ran(*first, "reference"));
  // A clip change is a post-process: no kernel, grid or reference stage runs again.
  req.run.clip_norm = 0.5;
  const Result<HeadResult> clipped = compute_head(c, req, &cache);
  ASSERT_TRUE(clipped.ok() && clipped->clip.has_value());
  ASSERT_TRUE(!ran(*clipped, "inputs") && !ran(*clipped, "cpu fwd+bwd"));
  ASSERT_TRUE(!ran(*clipped, "score grids") && !ran(*clipped, "reference"));
  ASSERT_TRUE(clipped->clip->coef < 1.0);
  // The cached stages give exactly what a fresh computation gives.
  const Result<HeadResult> fresh = compute_head(c, req);
  ASSERT_TRUE(fresh.ok());
  for (HeadView v : kHeadViews) {
    ASSERT_TRUE(sameBits(clipped->grid(v).raw, fresh->grid(v).raw)) << head_view_name(v);
  }
  // Unclipped again: the cached kernel outputs were not scaled in place.
  req.run.clip_norm.reset();
  const Result<HeadResult> back = compute_head(c, req, &cache);
  ASSERT_TRUE(back.ok());
  ASSERT_TRUE(sameBits(back->dq.raw, first->dq.raw));
  // A new scale reruns the kernels and the grids.
  req.run.scale = 0.5;
  const Result<HeadResult> rescaled = compute_head(c, req, &cache);
  ASSERT_TRUE(rescaled.ok());
  ASSERT_TRUE(ran(*rescaled, "cpu fwd+bwd") && ran(*rescaled, "score grids"));
  ASSERT_TRUE(!sameBits(rescaled->s->raw, first->s->raw));
  // The scale only enters the params: the converted inputs are reused, and every view (the
  // fp64 reference's errors included) is what a fresh computation at that scale gives.
  ASSERT_TRUE(!ran(*rescaled, "inputs") && ran(*rescaled, "reference"));
  const Result<HeadResult> fresh_rescaled = compute_head(c, req);
  ASSERT_TRUE(fresh_rescaled.ok());
  ASSERT_EQ(rescaled->scale, 0.5);
  for (HeadView v : kHeadViews) {
    ASSERT_TRUE(sameBits(rescaled->grid(v).raw, fresh_rescaled->grid(v).raw)) << head_view_name(v);
  }
  // A scale the inputs would refuse is refused from the cache as well.
  req.run.scale = -1.0;
  ASSERT_TRUE(!compute_head(c, req, &cache).ok());
}

// The case is converted once per precision / mask fill: another head only slices it. The score
// grids a result shows are the cache's own (shared, not copied), and stay as they were when a
// later request replaces them in the cache.
TEST(HeadCompute, another_head_slices_the_converted_case_and_grids_are_shared) {
  const CaseData c = smoothCase(2);
  HeadCache cache;
  HeadRequest req;
  const Result<HeadResult> h0 = compute_head(c, req, &cache);
  ASSERT_TRUE(h0.ok() && ran(*h0, "inputs") && ran(*h0, "head slice"));
  req.run.clip_norm = 0.5;
  const Result<HeadResult> clipped = compute_head(c, req, &cache);
  ASSERT_TRUE(clipped.ok() && !ran(*clipped, "head slice") && !ran(*clipped, "score grids"));
  for (HeadView v : kScoreViews) {
    ASSERT_EQ(&clipped->grid(v), &h0->grid(v)) << head_view_name(v);
  }
  const std::vector<float> h0_s = h0->s->raw;

  req.head = 1;
  const Result<HeadResult> h1 = compute_head(c, req, &cache);
  ASSERT_TRUE(h1.ok() && !ran(*h1, "inputs") && ran(*h1, "head slice"));
  ASSERT_TRUE(ran(*h1, "cpu fwd+bwd"));
  const Result<HeadResult> fresh = compute_head(c, req);
  ASSERT_TRUE(fresh.ok());
  for (HeadView v : kHeadViews) {
    ASSERT_TRUE(sameBits(h1->grid(v).raw, fresh->grid(v).raw)) << head_view_name(v);
  }
  ASSERT_TRUE(!sameBits(h1->s->raw, h0_s));            // the heads differ ...
  ASSERT_TRUE(sameBits(h0->s->raw, h0_s));             // ... and head 0's result kept its grid
  ASSERT_TRUE(sameBits(h1->dq_norm, fresh->dq_norm));  // the row series too

  req.run.precision = Precision::f16;  // another conversion of the whole case
  const Result<HeadResult> half = compute_head(c, req, &cache);
  ASSERT_TRUE(half.ok() && ran(*half, "inputs") && ran(*half, "head slice"));
}

// Each stage reruns when the part of the request its key names changes, and only then: a
// window or pixel-size change pools the grids again without a kernel pass, a mode change reruns
// the kernels on the same slice, a mask fill change makes new inputs.
TEST(HeadCompute, each_stage_reruns_only_for_its_own_key) {
  const CaseData c = smoothCase();
  HeadCache cache;
  HeadRequest req;
  req.out_rows = req.out_cols = 8;  // pooled
  const Result<HeadResult> first = compute_head(c, req, &cache);
  ASSERT_TRUE(first.ok() && ran(*first, "inputs") && ran(*first, "cpu fwd+bwd+pool"));
  ASSERT_TRUE(compute_head(c, req, &cache)->phases.size() == 1);  // only "grids" (assembly)

  req.out_rows = req.out_cols = 4;
  const Result<HeadResult> smaller = compute_head(c, req, &cache);
  ASSERT_TRUE(smaller.ok() && ran(*smaller, "score grids"));
  ASSERT_TRUE(!ran(*smaller, "cpu fwd+bwd") && !ran(*smaller, "cpu fwd+bwd+pool"));
  ASSERT_EQ(smaller->s->rows, 4);

  req.run.modes = {Mode::unfused};
  const Result<HeadResult> unfused = compute_head(c, req, &cache);
  ASSERT_TRUE(unfused.ok() && !ran(*unfused, "inputs") && !ran(*unfused, "head slice"));
  ASSERT_TRUE(ran(*unfused, "cpu fwd+bwd+pool"));
  const Result<HeadResult> fresh = compute_head(c, req);
  ASSERT_TRUE(fresh.ok());
  for (HeadView v : kHeadViews) {
    ASSERT_TRUE(sameBits(unfused->grid(v).raw, fresh->grid(v).raw)) << head_view_name(v);
  }

  req.run.mask_fill = MaskFill::neg_1e9;
  const Result<HeadResult> filled = compute_head(c, req, &cache);
  ASSERT_TRUE(filled.ok() && ran(*filled, "inputs") && ran(*filled, "head slice"));
  ASSERT_EQ(filled->mask_fill, MaskFill::neg_1e9);
}

TEST(HeadCompute, small_window_over_budget_is_pooled) {
  const CaseData c = smoothCase();
  HeadRequest req;  // 512 x 512 pixels: the whole 40 x 56 matrix fits the view
  // 40 * 56 entries * 17 bytes = 38080 bytes, more than a quarter of 64 KiB.
  ASSERT_TRUE(set_memory_budget("64K", "test").ok());
  const Result<HeadResult> pooled = compute_head(c, req);
  clear_memory_budget();
  ASSERT_TRUE(pooled.ok());
  ASSERT_TRUE(pooled->s->pooled && pooled->ds->pooled);
  ASSERT_TRUE(pooled->s->rows < 40 && pooled->s->cols < 56);
  ASSERT_EQ(pooled->s->row_edges.back(), int64_t{40});
  ASSERT_EQ(pooled->s->col_edges.back(), int64_t{56});
  ASSERT_TRUE(set_memory_budget("1M", "test").ok());
  const Result<HeadResult> full = compute_head(c, req);
  clear_memory_budget();
  ASSERT_TRUE(full.ok());
  ASSERT_TRUE(!full->s->pooled && full->s->complete());
  // Pooling keeps every element: the pooled counts match the full-resolution ones.
  ASSERT_EQ(pooled->p->counts.nonfinite(), full->p->counts.nonfinite());
}

TEST(HeadCompute, pools_requested_score_matrices_only) {
  const CaseData c = smoothCase();
  HeadRequest req;
  req.out_rows = 16;  // 40 x 56 scores pooled to 16 x 16 cells
  req.out_cols = 16;
  const Result<HeadResult> all = compute_head(c, req);
  ASSERT_TRUE(all.ok() && all->s->pooled);
  const MatrixGrid* expected[] = {all->s.get(), all->p.get(), all->dp.get(), all->ds.get()};

  HeadCache cache;
  req.scores = {false, false, true, false};  // dP alone, pooled by the backward on the way
  const Result<HeadResult> dp = compute_head(c, req, &cache);
  ASSERT_TRUE(dp.ok() && ran(*dp, "cpu fwd+bwd+pool"));
  ASSERT_TRUE(dp->s->empty() && dp->p->empty() && dp->ds->empty());
  ASSERT_TRUE(sameGrid(*dp->dp, *all->dp));
  ASSERT_EQ(dp->dp->counts.nonfinite(), all->dp->counts.nonfinite());
  // S next: the kernel is cached, S alone is pooled in a pass of its own; dP is kept.
  req.scores = {true, false, false, false};
  const Result<HeadResult> s = compute_head(c, req, &cache);
  ASSERT_TRUE(s.ok() && !ran(*s, "cpu fwd+bwd") && !ran(*s, "cpu fwd+bwd+pool"));
  ASSERT_TRUE(ran(*s, "score grids"));
  ASSERT_TRUE(sameGrid(*s->s, *all->s) && sameGrid(*s->dp, *all->dp));
  ASSERT_TRUE(s->p->empty() && s->ds->empty());
  // Every matrix asked for: the missing two are added, bit for bit what one run gives.
  req.scores = kAllScores;
  const Result<HeadResult> rest = compute_head(c, req, &cache);
  ASSERT_TRUE(rest.ok() && !ran(*rest, "cpu fwd+bwd"));
  const MatrixGrid* got[] = {rest->s.get(), rest->p.get(), rest->dp.get(), rest->ds.get()};
  for (int k = 0; k < 4; ++k)
    ASSERT_TRUE(sameGrid(*got[k], *expected[k])) << head_view_name(kScoreViews[k]);
  // None asked for: a new scale runs the kernel without pooling and keeps no stale grid.
  req.scores = {};
  req.run.scale = 0.5;
  const Result<HeadResult> none = compute_head(c, req, &cache);
  ASSERT_TRUE(none.ok() && ran(*none, "cpu fwd+bwd") && !ran(*none, "score grids"));
  ASSERT_TRUE(none->s->empty() && none->p->empty() && none->dp->empty() && none->ds->empty());
  // At full resolution the request's subset does not matter: all four are computed.
  req.out_rows = req.out_cols = 512;
  const Result<HeadResult> full = compute_head(c, req, &cache);
  ASSERT_TRUE(full.ok() && full->s->complete() && full->p->complete() && full->ds->complete());
}

TEST(HeadCompute, forward_only_then_the_rest_is_the_whole_head_bit_for_bit) {
  const CaseData c = smoothCase();
  HeadRequest req;
  req.out_rows = 16;  // 40 x 56 scores pooled to 16 x 16 cells
  req.out_cols = 16;
  req.scores = {true, false, true, false};  // S and dP shown
  const Result<HeadResult> whole = compute_head(c, req);
  ASSERT_TRUE(whole.ok() && whole->gradients);

  HeadCache cache;
  req.forward_only = true;
  const Result<HeadResult> fwd = compute_head(c, req, &cache);
  ASSERT_TRUE(fwd.ok() && !fwd->gradients);
  // S is pooled by the forward on the way (no pass of its own), the same bits as the whole
  // head's; dP (asked for) waits for the backward, and no gradient is there.
  ASSERT_TRUE(ran(*fwd, "cpu fwd+pool") && !ran(*fwd, "score grids"));
  ASSERT_TRUE(sameGrid(*fwd->s, *whole->s) && sameGrid(fwd->o, whole->o));
  ASSERT_TRUE(sameBits(fwd->m, whole->m) && sameBits(fwd->l, whole->l) &&
              sameBits(fwd->lse, whole->lse) && sameBits(fwd->o_norm, whole->o_norm));
  ASSERT_TRUE(fwd->dp->empty() && fwd->dq.empty() && fwd->dk.empty() && fwd->dv.empty());
  ASSERT_TRUE(fwd->dq_norm.empty());

  // The same request without forward_only adds the backward (pooling dP on the way) and gives
  // the whole head's result.
  req.forward_only = false;
  const Result<HeadResult> rest = compute_head(c, req, &cache);
  ASSERT_TRUE(rest.ok() && rest->gradients);
  ASSERT_TRUE(ran(*rest, "cpu bwd+pool") && !ran(*rest, "cpu fwd+pool") &&
              !ran(*rest, "cpu fwd+bwd+pool"));
  ASSERT_TRUE(sameGrid(*rest->s, *whole->s) && sameGrid(*rest->dp, *whole->dp));
  for (HeadView v : {HeadView::o, HeadView::dq, HeadView::dk, HeadView::dv}) {
    ASSERT_TRUE(sameGrid(rest->grid(v), whole->grid(v))) << head_view_name(v);
  }
  ASSERT_TRUE(sameBits(rest->dq_norm, whole->dq_norm));
  // With the backward cached, forward_only gives the whole head (nothing left to wait for).
  req.forward_only = true;
  const Result<HeadResult> again = compute_head(c, req, &cache);
  ASSERT_TRUE(again.ok() && again->gradients && sameGrid(again->dq, whole->dq));
  // Not honoured where the forward alone cannot serve: with the reference, or at full resolution.
  req.run.scale = 0.5;
  req.reference = true;
  const Result<HeadResult> ref = compute_head(c, req, &cache);
  ASSERT_TRUE(ref.ok() && ref->gradients && !ref->dq_err.empty());
  req.reference = false;
  req.run.scale = 0.25;
  req.out_rows = req.out_cols = 512;
  const Result<HeadResult> full = compute_head(c, req, &cache);
  ASSERT_TRUE(full.ok() && full->gradients && full->ds->complete());
}

TEST(HeadCompute, forward_stats_then_forward_then_backward_is_the_whole_head_bit_for_bit) {
  const CaseData c = smoothCase();
  HeadRequest req;
  req.out_rows = 16;  // 40 x 56 scores pooled to 16 x 16 cells
  req.out_cols = 16;
  req.scores = {true, false, false, false};  // the S tab shown
  const Result<HeadResult> whole = compute_head(c, req);
  ASSERT_TRUE(whole.ok() && whole->gradients && whole->outputs);

  HeadCache cache;
  req.forward_only = req.forward_stats_only = true;
  const Result<HeadResult> stats = compute_head(c, req, &cache);
  ASSERT_TRUE(stats.ok() && !stats->gradients && !stats->outputs);
  // S pooled by the statistics pass on the way, and the row statistics: the whole head's bits;
  // O is left out.
  ASSERT_TRUE(ran(*stats, "cpu stats+pool") && !ran(*stats, "cpu fwd+pool"));
  ASSERT_TRUE(sameGrid(*stats->s, *whole->s));
  ASSERT_TRUE(sameBits(stats->m, whole->m) && sameBits(stats->l, whole->l) &&
              sameBits(stats->lse, whole->lse));
  ASSERT_TRUE(stats->o.empty() && stats->o_norm.empty() && stats->dq.empty());
  // Asked again: served from the cache, no kernel runs.
  const Result<HeadResult> cached = compute_head(c, req, &cache);
  ASSERT_TRUE(cached.ok() && !cached->outputs && !ran(*cached, "cpu stats") &&
              !ran(*cached, "cpu stats+pool"));
  ASSERT_TRUE(sameGrid(*cached->s, *whole->s));

  // The forward next keeps the pooled S (no second pooling), then the backward.
  req.forward_stats_only = false;
  const Result<HeadResult> fwd = compute_head(c, req, &cache);
  ASSERT_TRUE(fwd.ok() && fwd->outputs && !fwd->gradients);
  ASSERT_TRUE(ran(*fwd, "cpu fwd") && !ran(*fwd, "cpu fwd+pool"));
  ASSERT_TRUE(sameGrid(fwd->o, whole->o) && sameBits(fwd->o_norm, whole->o_norm));
  req.forward_only = false;
  const Result<HeadResult> rest = compute_head(c, req, &cache);
  ASSERT_TRUE(rest.ok() && rest->gradients && rest->outputs && ran(*rest, "cpu bwd"));
  ASSERT_TRUE(sameGrid(*rest->s, *whole->s));
  for (HeadView v : {HeadView::o, HeadView::dq, HeadView::dk, HeadView::dv}) {
    ASSERT_TRUE(sameGrid(rest->grid(v), whole->grid(v))) << head_view_name(v);
  }

  // From the statistics straight to the whole head: the forward and backward run, S is kept.
  HeadCache other;
  req.run.scale = 0.5;
  req.forward_only = req.forward_stats_only = true;
  ASSERT_TRUE(compute_head(c, req, &other).ok());
  req.forward_only = req.forward_stats_only = false;
  const Result<HeadResult> after = compute_head(c, req, &other);
  const Result<HeadResult> direct = compute_head(c, req);
  ASSERT_TRUE(after.ok() && direct.ok() && ran(*after, "cpu fwd+bwd"));
  ASSERT_TRUE(sameGrid(*after->s, *direct->s) && sameGrid(after->o, direct->o) &&
              sameGrid(after->dq, direct->dq));
  // Unfused: not honoured, the forward runs.
  req.run.modes = {Mode::unfused};
  req.forward_only = req.forward_stats_only = true;
  const Result<HeadResult> unfused = compute_head(c, req, &other);
  ASSERT_TRUE(unfused.ok() && unfused->outputs && !unfused->o.empty());
}

}  // namespace
}  // namespace attnscope::test
