// compute_head's results on the real window (compute_head itself: tests/view): the error tabs
// show the dK / dV error grids, a pooled head computes the shown score tab in the window while
// export computes the rest, and a scale change draws S from the forward before the backward.
#include <QDir>
#include <QSignalSpy>
#include <QTabWidget>
#include <QtTest>

#include "GuiTest.h"
#include "app/gui/ComputeWorker.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/view/head_result_checks.h"

namespace attnscope::test {

void GuiTest::error_tabs_show_dk_and_dv_errors() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  HeatmapPanel* heatmaps = f.window->heatmaps();
  QCOMPARE(heatmaps->tabs()->tabText(static_cast<int>(HeadView::dk_err)), QStringLiteral("dK err"));
  QCOMPARE(heatmaps->tabs()->tabText(static_cast<int>(HeadView::dv_err)), QStringLiteral("dV err"));
  heatmaps->tabs()->setCurrentWidget(heatmaps->view(HeadView::dk_err));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return !r.dk_err.empty(); }));
  const auto r = f.context()->result();
  const MatrixGrid* shown = heatmaps->view(HeadView::dk_err)->grid();
  QVERIFY(shown != nullptr);
  QCOMPARE(shown->rows, r->seqlen_k);
  QCOMPARE(shown->cols, r->head_dim);
  QVERIFY(sameBits(shown->raw, r->dk_err.raw));
  QVERIFY(heatmaps->view(HeadView::dv_err)->grid() != nullptr);
  QVERIFY(f.errors.isEmpty());
}

void GuiTest::pooled_head_computes_shown_score_tab_and_exports_all() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/healthy_b2_h8_s1024")}));
  HeatmapPanel* heatmaps = f.window->heatmaps();
  QCOMPARE(heatmaps->currentView()->name(), QStringLiteral("S"));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.s->pooled; }));
  auto r = f.context()->result();
  QVERIFY(r->p->empty() && r->dp->empty() && r->ds->empty());
  QVERIFY(heatmaps->view(HeadView::ds)->grid() == nullptr);
  // Showing dS computes it (the kernel is cached) and keeps S.
  heatmaps->tabs()->setCurrentWidget(heatmaps->view(HeadView::ds));
  const HeadRequest shownS = r->request;
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return !r.ds->empty(); }));
  r = f.context()->result();
  QStringList phases;
  for (const HeadPhase& p : r->phases) phases << QString::fromLatin1(p.name);
  QVERIFY2(r->p->empty() && !ran(*r, "cpu fwd+bwd+pool"),
           qPrintable(phases.join(QStringLiteral(", "))));
  // S is kept from the cache when its grid is the one shown before; a heatmap that changed
  // size in between (the docks still settling on a busy machine) needs a new S, not computed
  // while its tab is hidden.
  if (r->request.out_rows == shownS.out_rows && r->request.out_cols == shownS.out_cols &&
      r->request.window == shownS.window) {
    QVERIFY2(!r->s->empty(), qPrintable(phases.join(QStringLiteral(", "))));
  }
  QTRY_VERIFY(heatmaps->view(HeadView::ds)->grid() != nullptr);
  // The same grid as computing every matrix of the head at once.
  Result<CaseData> data = f.context()->reader()->load("/healthy_b2_h8_s1024");
  QVERIFY(data.ok());
  HeadRequest all = r->request;
  all.scores = kAllScores;
  const Result<HeadResult> direct = compute_head(*data, all);
  QVERIFY(direct.ok());
  QVERIFY(sameGrid(*heatmaps->view(HeadView::ds)->grid(), *direct->ds));
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
  QVERIFY(sameGrid(*r->s, *after->s) && sameGrid(*r->p, *after->p) &&
          sameGrid(*r->dp, *after->dp) && sameGrid(*r->ds, *after->ds));
  QVERIFY(written.contains(QDir(dir.path()).filePath(QStringLiteral("P.png"))));
  QVERIFY(heatmaps->view(HeadView::p)->grid() != nullptr);
  QCOMPARE(f.context()->scoresWanted(), (ScoreSet{false, false, false, true}));
  QVERIFY(f.errors.isEmpty());
}

void GuiTest::scale_change_draws_the_forward_views_before_the_backward() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/healthy_b2_h8_s1024")}));
  HeatmapPanel* heatmaps = f.window->heatmaps();
  QCOMPARE(heatmaps->currentView()->name(), QStringLiteral("S"));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.s->pooled; }));
  // At the hand-over (after the window applied it): what the S tab shows, from the forward's
  // statistics alone.
  std::shared_ptr<const HeadResult> forward;
  const MatrixGrid* shownS = nullptr;
  ComputeWorker* worker = f.window->worker();
  connect(worker, &ComputeWorker::forwardReady, f.window.get(), [&] {
    forward = f.context()->result();
    shownS = heatmaps->view(HeadView::s)->grid();
  });
  QSignalSpy ready(worker, &ComputeWorker::forwardReady);
  QSignalSpy finished(worker, &ComputeWorker::finished);
  const double scale = f.context()->defaultScale() * 3;
  f.context()->setScale(scale);
  QVERIFY(waitForResult(*f.window, [&](const HeadResult& r) { return r.scale == scale; }));
  // (More than one job when the docks were still settling: a new heatmap size recomputes.)
  QVERIFY(ready.count() >= 1 && finished.count() >= 1);
  QVERIFY(forward != nullptr && !forward->gradients && !forward->outputs);
  QVERIFY(forward->scale == scale && shownS == forward->s.get() && !forward->lse.empty());
  QVERIFY(forward->o.empty() && forward->o_norm.empty());
  QVERIFY(forward->dq.empty() && forward->dk.empty() && forward->dq_norm.empty());
  // Then the forward and the backward: S and the row statistics the same bits, the whole head.
  const auto r = f.context()->result();
  QVERIFY(r->gradients && r->outputs && !r->o.empty() && !r->dq.empty() && !r->dq_norm.empty());
  QVERIFY(sameGrid(*r->s, *forward->s) && sameBits(r->lse, forward->lse));
  Result<CaseData> data = f.context()->reader()->load("/healthy_b2_h8_s1024");
  QVERIFY(data.ok());
  const Result<HeadResult> direct = compute_head(*data, r->request);
  QVERIFY(direct.ok());
  QVERIFY(sameGrid(*direct->s, *r->s) && sameGrid(direct->dq, r->dq) &&
          sameGrid(direct->dk, r->dk) && sameGrid(direct->dv, r->dv));
  // The O tab shown: the forward's result (with O) first.
  heatmaps->tabs()->setCurrentWidget(heatmaps->view(HeadView::o));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  forward.reset();
  f.context()->setScale(scale * 2);
  QVERIFY(waitForResult(*f.window, [&](const HeadResult& r) { return r.scale == scale * 2; }));
  QVERIFY(forward != nullptr && !forward->gradients && forward->outputs && !forward->o.empty());
  QVERIFY(sameGrid(f.context()->result()->o, forward->o));
  // A gradient tab shown: one result, the whole head's, no forward first.
  heatmaps->tabs()->setCurrentWidget(heatmaps->view(HeadView::dq));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  const int handedOver = ready.count();
  f.context()->setScale(scale / 2);
  QVERIFY(waitForResult(*f.window, [&](const HeadResult& r) { return r.scale == scale / 2; }));
  QCOMPARE(ready.count(), handedOver);
  QVERIFY(f.context()->result()->gradients);
  QVERIFY(f.errors.isEmpty());
}

}  // namespace attnscope::test
