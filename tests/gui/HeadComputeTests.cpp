// compute_head beyond the score matrices: the four error-vs-fp64 grids (exact layout, fp32
// small, fp16 visibly larger) and their tabs, the stage cache (a clip change reruns neither
// the kernels nor the score grids, and cached results equal fresh ones) and the memory budget
// (a small full-resolution window over the budget is pooled), and pooled score grids computed
// per matrix (only those asked for, the shown tab's in the window; export computes the rest).
#include <QDir>
#include <QTabWidget>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <cstring>

#include "GuiTest.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "core/case_inputs.h"
#include "core/memory_budget.h"
#include "kernels/reference/reference_attention.h"

namespace attnscope::test {
namespace {

// Sq = 40 queries, Sk = 56 keys, D = Dv = 16, one head; smooth values of either sign.
CaseData smoothCase() {
  const int64_t sq = 40, sk = 56, d = 16;
  CaseData c;
  c.info.path = "/smooth";
  c.info.dims = {1, 1, 1, sq, sk, d, d};
  c.info.config.dtype = "float32";
  const auto fill = [](int64_t n, float f) {
    std::vector<float> x(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 2.0f * std::sin(f * static_cast<float>(i) + f);
    return x;
  };
  c.tensors["q"] = HostTensor::from_float(DType::f32, {1, 1, sq, d}, fill(sq * d, 0.37f));
  c.tensors["k"] = HostTensor::from_float(DType::f32, {1, 1, sk, d}, fill(sk * d, 0.53f));
  c.tensors["v"] = HostTensor::from_float(DType::f32, {1, 1, sk, d}, fill(sk * d, 0.71f));
  c.tensors["do"] = HostTensor::from_float(DType::f32, {1, 1, sq, d}, fill(sq * d, 0.29f));
  return c;
}

double maxAbsOf(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

bool sameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool sameGrid(const MatrixGrid& a, const MatrixGrid& b) {
  return !a.empty() && a.rows == b.rows && a.cols == b.cols && a.cls == b.cls &&
         sameBits(a.value, b.value) && sameBits(a.cell_min, b.cell_min) &&
         sameBits(a.cell_max, b.cell_max) && a.row_edges == b.row_edges &&
         a.col_edges == b.col_edges;
}

bool ran(const HeadResult& r, const char* phase) {
  return std::any_of(r.phases.begin(), r.phases.end(),
                     [&](const HeadPhase& p) { return std::strcmp(p.name, phase) == 0; });
}

}  // namespace

void GuiTest::head_compute_error_grids_for_o_dq_dk_dv() {
  const CaseData c = smoothCase();
  RunSettings settings;
  settings.precision = Precision::f32;
  Result<CaseInputs> in = make_case_inputs(c, settings);
  QVERIFY(in.ok());
  const ReferenceTrace ref =
      reference_attention(in->params, in->q.data(), in->k.data(), in->v.data(), in->dout.data());
  HeadRequest req;
  req.reference = true;
  req.settings.precision = Precision::f32;
  const Result<HeadResult> f32 = compute_head(c, req);
  QVERIFY(f32.ok());
  struct Expect {
    const char* name;
    const MatrixGrid& value;
    const std::vector<double>& ref;
    int64_t rows;
  };
  const Expect expect[] = {{"O err", f32->o, ref.o, 40},
                           {"dQ err", f32->dq, ref.dq, 40},
                           {"dK err", f32->dk, ref.dk, 56},
                           {"dV err", f32->dv, ref.dv, 56}};
  for (const Expect& e : expect) {
    const MatrixGrid* err = f32->grid(e.name);
    QVERIFY2(err != nullptr && !err->empty(), e.name);
    QCOMPARE(err->rows, e.rows);
    QCOMPARE(err->cols, int64_t{16});
    // Element (i, c) is the kernel's value minus the reference's at the same place.
    for (size_t k = 0; k < err->raw.size(); ++k) {
      QCOMPARE(err->raw[k], static_cast<float>(e.value.raw[k] - e.ref[k]));
    }
    QVERIFY2(maxAbsOf(err->raw) <= 1e-5 * maxAbsOf(e.value.raw), e.name);
  }
  // fp16 storage: the gradients' error is visible, still within a few fp16 ulps of the values.
  req.settings.precision = Precision::f16;
  const Result<HeadResult> f16 = compute_head(c, req);
  QVERIFY(f16.ok());
  for (const char* name : {"dK err", "dV err"}) {
    const double err = maxAbsOf(f16->grid(name)->raw);
    const double err32 = maxAbsOf(f32->grid(name)->raw);
    const double scale = maxAbsOf(f16->grid(name[1] == 'K' ? "dK" : "dV")->raw);
    QVERIFY2(err > 10 * err32 && err > 1e-4 * scale, name);
    QVERIFY2(err < 1e-2 * scale, name);
  }
  // Without request.reference the error grids stay empty.
  req.reference = false;
  const Result<HeadResult> none = compute_head(c, req);
  QVERIFY(none.ok() && none->dk_err.empty() && none->dv_err.empty());
}

void GuiTest::head_compute_cache_reruns_only_later_stages() {
  const CaseData c = smoothCase();
  HeadCache cache;
  HeadRequest req;
  req.reference = true;
  const Result<HeadResult> first = compute_head(c, req, &cache);
  QVERIFY(first.ok());
  QVERIFY(ran(*first, "cpu fwd+bwd") && ran(*first, "score grids") && ran(*first, "reference"));
  // A clip change is a post-process: no kernel, grid or reference stage runs again.
  req.clip_norm = 0.5;
  const Result<HeadResult> clipped = compute_head(c, req, &cache);
  QVERIFY(clipped.ok() && clipped->clip.has_value());
  QVERIFY(!ran(*clipped, "inputs") && !ran(*clipped, "cpu fwd+bwd"));
  QVERIFY(!ran(*clipped, "score grids") && !ran(*clipped, "reference"));
  QVERIFY(clipped->clip->coef < 1.0);
  // The cached stages give exactly what a fresh computation gives.
  const Result<HeadResult> fresh = compute_head(c, req);
  QVERIFY(fresh.ok());
  for (const char* name : kHeadMatrices) {
    QVERIFY2(sameBits(clipped->grid(name)->raw, fresh->grid(name)->raw), name);
  }
  // Unclipped again: the cached kernel outputs were not scaled in place.
  req.clip_norm.reset();
  const Result<HeadResult> back = compute_head(c, req, &cache);
  QVERIFY(back.ok());
  QVERIFY(sameBits(back->dq.raw, first->dq.raw));
  // A new scale reruns the kernels and the grids.
  req.settings.scale = 0.5;
  const Result<HeadResult> rescaled = compute_head(c, req, &cache);
  QVERIFY(rescaled.ok());
  QVERIFY(ran(*rescaled, "cpu fwd+bwd") && ran(*rescaled, "score grids"));
  QVERIFY(!sameBits(rescaled->s.raw, first->s.raw));
  // The scale only enters the params: the converted inputs are reused, and every view (the
  // fp64 reference's errors included) is what a fresh computation at that scale gives.
  QVERIFY(!ran(*rescaled, "inputs") && ran(*rescaled, "reference"));
  const Result<HeadResult> fresh_rescaled = compute_head(c, req);
  QVERIFY(fresh_rescaled.ok());
  QCOMPARE(rescaled->scale, 0.5);
  for (const char* name : kHeadMatrices) {
    QVERIFY2(sameBits(rescaled->grid(name)->raw, fresh_rescaled->grid(name)->raw), name);
  }
  // A scale the inputs would refuse is refused from the cache as well.
  req.settings.scale = -1.0;
  QVERIFY(!compute_head(c, req, &cache).ok());
}

void GuiTest::head_compute_small_window_over_budget_is_pooled() {
  const CaseData c = smoothCase();
  HeadRequest req;  // 512 x 512 pixels: the whole 40 x 56 matrix fits the view
  // 40 * 56 entries * 17 bytes = 38080 bytes, more than a quarter of 64 KiB.
  QVERIFY(set_memory_budget("64K", "test").ok());
  const Result<HeadResult> pooled = compute_head(c, req);
  clear_memory_budget();
  QVERIFY(pooled.ok());
  QVERIFY(pooled->s.pooled && pooled->ds.pooled);
  QVERIFY(pooled->s.rows < 40 && pooled->s.cols < 56);
  QCOMPARE(pooled->s.row_edges.back(), int64_t{40});
  QCOMPARE(pooled->s.col_edges.back(), int64_t{56});
  QVERIFY(set_memory_budget("1M", "test").ok());
  const Result<HeadResult> full = compute_head(c, req);
  clear_memory_budget();
  QVERIFY(full.ok());
  QVERIFY(!full->s.pooled && full->s.complete());
  // Pooling keeps every element: the pooled counts match the full-resolution ones.
  QCOMPARE(pooled->p.counts.nonfinite(), full->p.counts.nonfinite());
}

void GuiTest::error_tabs_show_dk_and_dv_errors() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  HeatmapPanel* heatmaps = f.window->heatmaps();
  for (const char* name : {"dK err", "dV err"}) {
    QVERIFY2(heatmaps->view(QString::fromLatin1(name)) != nullptr, name);
  }
  QVERIFY(heatmaps->showMatrix(QStringLiteral("dK err")));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return !r.dk_err.empty(); }));
  const auto r = f.context()->result();
  const MatrixGrid* shown = heatmaps->view(QStringLiteral("dK err"))->grid();
  QVERIFY(shown != nullptr);
  QCOMPARE(shown->rows, r->seqlen_k);
  QCOMPARE(shown->cols, r->head_dim);
  QVERIFY(sameBits(shown->raw, r->dk_err.raw));
  QVERIFY(heatmaps->view(QStringLiteral("dV err"))->grid() != nullptr);
  QVERIFY(f.errors.isEmpty());
}

void GuiTest::head_compute_pools_requested_score_matrices_only() {
  const CaseData c = smoothCase();
  HeadRequest req;
  req.out_rows = 16;  // 40 x 56 scores pooled to 16 x 16 cells
  req.out_cols = 16;
  const Result<HeadResult> all = compute_head(c, req);
  QVERIFY(all.ok() && all->s.pooled);
  const MatrixGrid* expected[] = {&all->s, &all->p, &all->dp, &all->ds};

  HeadCache cache;
  req.scores = {false, false, true, false};  // dP alone, pooled by the backward on the way
  const Result<HeadResult> dp = compute_head(c, req, &cache);
  QVERIFY(dp.ok() && ran(*dp, "cpu fwd+bwd+pool"));
  QVERIFY(dp->s.empty() && dp->p.empty() && dp->ds.empty());
  QVERIFY(sameGrid(dp->dp, all->dp));
  QCOMPARE(dp->dp.counts.nonfinite(), all->dp.counts.nonfinite());
  // S next: the kernel is cached, S alone is pooled in a pass of its own; dP is kept.
  req.scores = {true, false, false, false};
  const Result<HeadResult> s = compute_head(c, req, &cache);
  QVERIFY(s.ok() && !ran(*s, "cpu fwd+bwd") && !ran(*s, "cpu fwd+bwd+pool"));
  QVERIFY(ran(*s, "score grids"));
  QVERIFY(sameGrid(s->s, all->s) && sameGrid(s->dp, all->dp));
  QVERIFY(s->p.empty() && s->ds.empty());
  // Every matrix asked for: the missing two are added, bit for bit what one run gives.
  req.scores = kAllScores;
  const Result<HeadResult> rest = compute_head(c, req, &cache);
  QVERIFY(rest.ok() && !ran(*rest, "cpu fwd+bwd"));
  const MatrixGrid* got[] = {&rest->s, &rest->p, &rest->dp, &rest->ds};
  for (int k = 0; k < 4; ++k) QVERIFY2(sameGrid(*got[k], *expected[k]), kScoreMatrices[k]);
  // None asked for: a new scale runs the kernel without pooling and keeps no stale grid.
  req.scores = {};
  req.settings.scale = 0.5;
  const Result<HeadResult> none = compute_head(c, req, &cache);
  QVERIFY(none.ok() && ran(*none, "cpu fwd+bwd") && !ran(*none, "score grids"));
  QVERIFY(none->s.empty() && none->p.empty() && none->dp.empty() && none->ds.empty());
  // At full resolution the request's subset does not matter: all four are computed.
  req.out_rows = req.out_cols = 512;
  const Result<HeadResult> full = compute_head(c, req, &cache);
  QVERIFY(full.ok() && full->s.complete() && full->p.complete() && full->ds.complete());
}

void GuiTest::pooled_head_computes_shown_score_tab_and_exports_all() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/healthy_b2_h8_s1024")}));
  HeatmapPanel* heatmaps = f.window->heatmaps();
  QCOMPARE(heatmaps->currentView()->name(), QStringLiteral("S"));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.s.pooled; }));
  auto r = f.context()->result();
  QVERIFY(r->p.empty() && r->dp.empty() && r->ds.empty());
  QVERIFY(heatmaps->view(QStringLiteral("dS"))->grid() == nullptr);
  // Showing dS computes it (the kernel is cached) and keeps S.
  QVERIFY(heatmaps->showMatrix(QStringLiteral("dS")));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return !r.ds.empty(); }));
  r = f.context()->result();
  QVERIFY(!r->s.empty() && r->p.empty() && !ran(*r, "cpu fwd+bwd+pool"));
  QTRY_VERIFY(heatmaps->view(QStringLiteral("dS"))->grid() != nullptr);
  // The same grid as computing every matrix of the head at once.
  Result<CaseData> data = f.context()->reader()->load("/healthy_b2_h8_s1024");
  QVERIFY(data.ok());
  HeadRequest all = r->request;
  all.scores = kAllScores;
  const Result<HeadResult> direct = compute_head(*data, all);
  QVERIFY(direct.ok());
  QVERIFY(sameGrid(*heatmaps->view(QStringLiteral("dS"))->grid(), direct->ds));
  // Export all views computes the missing P and dP first; the shown tab's set is restored.
  QTemporaryDir dir;
  QString error;
  const QStringList written = f.window->exportAllViews(dir.path(), &error);
  QVERIFY2(error.isEmpty(), qPrintable(error));
  r = f.context()->result();
  all = r->request;
  all.scores = kAllScores;
  const Result<HeadResult> after = compute_head(*data, all);
  QVERIFY(after.ok());
  QVERIFY(sameGrid(r->s, after->s) && sameGrid(r->p, after->p) && sameGrid(r->dp, after->dp) &&
          sameGrid(r->ds, after->ds));
  QVERIFY(written.contains(QDir(dir.path()).filePath(QStringLiteral("P.png"))));
  QVERIFY(heatmaps->view(QStringLiteral("P"))->grid() != nullptr);
  QCOMPARE(f.context()->scoresWanted(), (ScoreSet{false, false, false, true}));
  QVERIFY(f.errors.isEmpty());
}

}  // namespace attnscope::test
