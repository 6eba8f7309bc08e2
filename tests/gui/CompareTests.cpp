// The compare view on the real window (issue 15 item 6): Ctrl+K shows one view of the head in
// two runs side by side, fused against unfused fp16 on the sample's overflow case (S finite in
// A, +inf in B, the difference's overlay marking B's cells), zoomed together; the recorded dQ
// of /recorded_mismatch against the recomputed one (the corrupted columns stand out); a view
// with nothing recorded says so; "Back to the heatmaps" returns to the tabs.
#include <QComboBox>
#include <QStackedWidget>
#include <QTabWidget>
#include <QToolButton>
#include <QtTest>

#include "app/gui/CompareController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/ComparePanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/GuiTest.h"

namespace attnscope::test {
namespace {

// Picks the entry of `box` whose data satisfies `match`, as the user would.
template <class Match>
void pick(QComboBox* box, Match match) {
  for (int i = 0; i < box->count(); ++i) {
    if (!match(box->itemData(i))) continue;
    box->setCurrentIndex(i);
    emit box->activated(i);
    return;
  }
  QFAIL("no such entry");
}

// Waits for a comparison of `view` at (batch 0, head) of `casePath` that `ok` accepts.
bool waitForComparison(MainWindow& w, const QString& casePath, int64_t head, HeadView view,
                       const std::function<bool(const Comparison&)>& ok) {
  return waitUntil([&] {
    const auto c = w.compare()->comparison();
    return c && !w.compare()->busy() && c->view == view && c->a &&
           c->a->case_path == casePath.toStdString() && c->a->request.head == head && ok(*c);
  });
}

}  // namespace

void GuiTest::compare_view_shows_two_runs_side_by_side_zoomed_together() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  f.context()->setHead(3);
  f.context()->setPrecision(Precision::f16);
  f.context()->setMode(Mode::fused);
  f.context()->showView(HeadView::s);
  f.window->activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(f.window.get()));
  QTest::keyClick(f.window.get(), Qt::Key_K, Qt::ControlModifier);
  ComparePanel* panel = f.window->comparePanel();
  QVERIFY(f.window->compareAction()->isChecked());
  QVERIFY(panel->isVisible());
  QVERIFY(!f.window->heatmaps()->isVisible());

  // B = the other mode (the default): unfused fp16 overflows in S, fused does not.
  QVERIFY(waitForComparison(*f.window, kOverflowCase, 3, HeadView::s,
                            [](const Comparison& c) { return c.b && c.difference; }));
  const auto c = f.window->compare()->comparison();
  QCOMPARE(c->a->request.mode(), Mode::fused);
  QCOMPARE(c->b->request.mode(), Mode::unfused);
  QCOMPARE(c->aGrid->counts.nonfinite(), int64_t{0});
  QVERIFY(c->bGrid->counts.pos_inf > 0);
  QCOMPARE(c->difference->only_a, int64_t{0});
  QCOMPARE(c->difference->only_b, c->bGrid->counts.nonfinite());
  QCOMPARE(panel->difference()->grid()->counts.pos_inf, c->bGrid->counts.pos_inf);
  QCOMPARE(panel->runB()->grid()->counts.pos_inf, c->bGrid->counts.pos_inf);
  QVERIFY2(
      panel->summary().contains(QStringLiteral("in B only: %1").arg(c->bGrid->counts.nonfinite())),
      qPrintable(panel->summary()));
  // At 1366x768 each run gets half the page: its legend wraps, no entry is cut.
  f.window->resize(1366, 728);
  f.window->resetLayout();
  QTest::qWait(100);
  for (HeatmapView* run : {panel->runA(), panel->runB()}) {
    auto* plot = run->findChild<QCustomPlot*>();
    QVERIFY(plot != nullptr);
    plot->replot();
    QCPLegend* legend = plot->legend;
    for (int i = 0; i < legend->elementCount(); ++i) {
      QCPLayoutElement* item = legend->elementAt(i);
      if (item == nullptr) continue;
      QVERIFY2(item->outerRect().width() >= item->minimumOuterSizeHint().width() &&
                   plot->rect().contains(item->outerRect()),
               qPrintable(qobject_cast<QCPPlottableLegendItem*>(item)->plottable()->name()));
    }
  }

  // One zoom for the three maps.
  const MatrixWindow rows{10, 42, 0, 64};
  panel->runA()->zoomTo(rows);
  QVERIFY(waitUntil([&] {
    return panel->runB()->visibleWindow() == rows && panel->difference()->visibleWindow() == rows;
  }));

  // The recorded dQ of head 1 of /recorded_mismatch against the recomputed one: the columns
  // the sample corrupted (3, 17, 29) hold the largest difference.
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/recorded_mismatch")}));
  f.context()->setHead(1);
  pick(panel->viewBox(), [](const QVariant& v) { return v.toInt() == int(HeadView::dq); });
  pick(panel->withBox(), [](const QVariant& v) {
    return v.toList().value(0).toInt() == int(CompareWith::Kind::recorded);
  });
  QVERIFY(waitForComparison(*f.window, QStringLiteral("/recorded_mismatch"), 1, HeadView::dq,
                            [](const Comparison& c) { return c.bLabel == "recorded"; }));
  const auto recorded = f.window->compare()->comparison();
  QVERIFY(recorded->difference.has_value());
  const int64_t col = recorded->difference->max_col;
  QVERIFY2(col == 3 || col == 17 || col == 29, qPrintable(QString::number(col)));
  QVERIFY(recorded->difference->max_abs > 0.1);
  // Nothing is recorded for S.
  pick(panel->viewBox(), [](const QVariant& v) { return v.toInt() == int(HeadView::s); });
  QVERIFY(waitForComparison(*f.window, QStringLiteral("/recorded_mismatch"), 1, HeadView::s,
                            [](const Comparison& c) { return !c.problem.isEmpty(); }));
  QVERIFY2(panel->summary().contains(QStringLiteral("nothing is recorded for S")),
           qPrintable(panel->summary()));

  // Back to the heatmaps.
  panel->findChild<QToolButton*>()->click();
  QVERIFY(!f.window->compareAction()->isChecked());
  QVERIFY(f.window->heatmaps()->isVisible());
  QVERIFY(!f.window->compare()->active());
}

}  // namespace attnscope::test
