// Case-level views of the real window: the findings list (a click selects the head and shows
// the location), the (batch x head) and (step x layer) overviews with the timeline, the scale
// sweep, and an event-loop watchdog showing the GUI thread stays responsive during recomputes.
#include <QLabel>
#include <QTreeWidget>
#include <QtTest>
#include <cmath>

#include "app/gui/AnalysisController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "app/panels/FindingsPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/OverviewPanel.h"
#include "app/panels/PanelReveal.h"
#include "app/panels/SweepPanel.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/RowPlotView.h"
#include "tests/gui/GuiTest.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {
namespace {

bool summaryFor(MainWindow& w, const QString& casePath) {
  const auto s = w.analysis()->summary();
  return s && s->case_path == casePath.toStdString() && !w.analysis()->summaryRunner()->busy();
}

// Opens the sample's overflow case in fp16 unfused and waits for its summary at those settings.
bool openOverflowFp16Unfused(MainWindow& w) {
  if (!w.openTarget({samplePath(), kOverflowCase})) return false;
  w.context()->setPrecision(Precision::f16);
  w.context()->setMode(Mode::unfused);
  return waitUntil([&] {
    const auto s = w.analysis()->summary();
    return summaryFor(w, kOverflowCase) && s->mode == Mode::unfused &&
           s->precision == Precision::f16;
  });
}

}  // namespace

void GuiTest::findings_click_selects_head_and_location() {
  WindowFixture f;
  QVERIFY(openOverflowFp16Unfused(*f.window));
  FindingsPanel* findings = f.window->findings();
  QVERIFY(findings->findingCount() > 0);
  const int row = findings->rowOfKind(QStringLiteral("score_overflow"));
  QVERIFY(row >= 0);
  QCOMPARE(f.context()->head(), int64_t{0});
  findings->activate(row);
  QCOMPARE(f.context()->head(), int64_t{3});  // the sample's overflow is in head 3
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.request.head == 3; }));
  QCOMPARE(f.window->heatmaps()->currentView()->name(), QStringLiteral("S"));
  // The S view shows the finding's rows (with some context around them).
  const Finding& finding = f.window->analysis()->summary()->findings[static_cast<size_t>(row)];
  const MatrixWindow shown = f.window->heatmaps()->currentView()->visibleWindow();
  QVERIFY(shown.row_begin <= finding.rows.first && shown.row_end > finding.rows.last);
  QVERIFY(shown.row_end - shown.row_begin < 128);
}

void GuiTest::findings_list_never_shows_a_replaced_summary() {
  WindowFixture f;
  QVERIFY(openOverflowFp16Unfused(*f.window));
  FindingsPanel* findings = f.window->findings();
  QVERIFY(findings->findingCount() > 0);
  auto header = [&] {
    return findings->findChild<QLabel*>(QStringLiteral("findingsHeader"))->text();
  };
  // Rows whose severity column says "error", against the header's "· N error(s)".
  auto consistent = [&] {
    int errors = 0;
    for (int i = 0; i < findings->findingCount(); ++i) {
      errors += findings->list()->topLevelItem(i)->text(0) == QStringLiteral("error");
    }
    return header().contains(QStringLiteral("· %1 error").arg(errors));
  };
  QVERIFY2(consistent(), qPrintable(header()));

  // A what-if: from the moment the new summary is asked for until it is in, no old row stays.
  f.context()->setPrecision(Precision::bf16);
  QCOMPARE(findings->findingCount(), 0);
  QVERIFY(header().startsWith(QStringLiteral("analysing")));
  QVERIFY(waitUntil([&] {
    const auto s = f.window->analysis()->summary();
    return summaryFor(*f.window, kOverflowCase) && s->precision == Precision::bf16;
  }));
  QVERIFY2(header().contains(QStringLiteral("bf16")), qPrintable(header()));
  QVERIFY2(consistent(), qPrintable(header()));
  QCOMPARE(findings->findingCount(),
           static_cast<int>(f.window->analysis()->summary()->findings.size()));
}

void GuiTest::overview_heads_match_head_views() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/train/step_006/layer_00")}));
  OverviewPanel* overview = f.window->overview();
  QVERIFY(waitUntil([&] { return summaryFor(*f.window, "/train/step_006/layer_00"); }));
  overview->setMetric(Metric::max_abs_s);
  const MatrixGrid* heads = overview->headMap()->grid();
  QVERIFY(heads != nullptr);
  QCOMPARE(heads->rows, int64_t{1});
  QCOMPARE(heads->cols, int64_t{2});
  // Clicking head 1 selects it; its max |S| is the largest finite visible score of its S view.
  overview->headMap()->clickCell(0, 1);
  QCOMPARE(f.context()->head(), int64_t{1});
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.request.head == 1; }));
  const auto r = f.context()->result();
  double maxS = 0;
  for (size_t e = 0; e < r->s->raw.size(); ++e) {
    if (r->s->cls[e] == CellClass::finite) maxS = std::max(maxS, std::fabs(double{r->s->raw[e]}));
  }
  heads = overview->headMap()->grid();  // redrawn with the new head outlined
  QCOMPARE(double{heads->raw[1]}, double{static_cast<float>(maxS)});
  QCOMPARE(*overview->headMap()->highlight(), (MatrixWindow{0, 1, 1, 2}));
  // ||dQ|| per head equals the norm of the dQ view.
  overview->setMetric(Metric::grad_norm);
  double sum = 0;
  for (float x : r->dq.raw) sum += double{x} * x;
  const float norm = overview->headMap()->grid()->raw[1];
  QVERIFY(std::fabs(norm - std::sqrt(sum)) <= 1e-5 * std::sqrt(sum));
}

void GuiTest::series_overview_and_timeline_navigate_steps() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/train/step_000/layer_00")}));
  OverviewPanel* overview = f.window->overview();
  QVERIFY(waitUntil([&] {
    const auto s = f.window->analysis()->series();
    return s && !f.window->analysis()->seriesRunner()->busy();
  }));
  overview->setMetric(Metric::max_abs_s);
  const MatrixGrid* cells = overview->seriesMap()->grid();
  QVERIFY(cells != nullptr);
  QCOMPARE(cells->rows, int64_t{8});  // steps 0-7
  QCOMPARE(cells->cols, int64_t{4});  // layers 0-3
  // The outliers grow 1.7x per step: max |S| rises along the steps of every layer.
  for (int64_t l = 0; l < 4; ++l) {
    for (int64_t s = 1; s < 8; ++s) {
      QVERIFY(cells->raw[static_cast<size_t>(s * 4 + l)] >
              cells->raw[static_cast<size_t>((s - 1) * 4 + l)]);
    }
  }
  QCOMPARE(overview->timeline()->seriesCount(), 4);
  QCOMPARE(*overview->seriesMap()->highlight(), (MatrixWindow{0, 1, 0, 1}));
  // A click on (step 5, layer 2) opens that case.
  overview->seriesMap()->clickCell(5, 2);
  QCOMPARE(f.context()->casePath(), QStringLiteral("/train/step_005/layer_02"));
  QCOMPARE(*overview->seriesMap()->highlight(), (MatrixWindow{5, 6, 2, 3}));
}

void GuiTest::sweep_view_counts_nonfinite_per_precision() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  f.context()->setMode(Mode::unfused);
  QVERIFY(!f.window->analysis()->sweep());  // the sweep runs only while its page is shown
  revealPanel(f.window->sweep());
  QVERIFY(waitUntil([&] {
    return f.window->analysis()->sweep() && !f.window->analysis()->sweepRunner()->busy();
  }));
  const ScaleSweep& sweep = *f.window->analysis()->sweep();
  QCOMPARE(sweep.ranges.size(), size_t{3});
  for (const SafeRange& r : sweep.ranges) {
    QCOMPARE(r.mode, Mode::unfused);
    // Unfused fp16 overflows at the case's scale; fp32 and bf16 stay finite there.
    QCOMPARE(r.case_scale_finite, r.precision != Precision::f16);
  }
  QCOMPARE(f.window->sweep()->nonfinitePlot()->seriesCount(), 3);
  QVERIFY(f.window->sweep()->rangesText().contains(QStringLiteral("fp16 unfused")));
  QVERIFY(f.window->sweep()->rangesText().contains(QStringLiteral("NOT finite")));
}

void GuiTest::gui_thread_stays_responsive_during_recompute() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/healthy_b2_h8_s1024")}));
  // Watchdog: a 10 ms timer on the GUI thread; the longest gap between its ticks is how long
  // the event loop was blocked.
  QElapsedTimer clock;
  clock.start();
  qint64 last = 0, worstGap = 0;
  QTimer watchdog;
  watchdog.setInterval(10);
  QObject::connect(&watchdog, &QTimer::timeout, [&] {
    const qint64 now = clock.elapsed();
    worstGap = std::max(worstGap, now - last);
    last = now;
  });
  last = clock.elapsed();
  watchdog.start();
  // Scale changes, a precision change and a head change while earlier jobs still run, plus the
  // case analysis of a B2 H8 S1024 case in the background.
  const double scales[] = {0.1, 0.2, 0.05, 0.3};
  for (double s : scales) {
    f.context()->setScale(s);
    QTest::qWait(50);
  }
  f.context()->setPrecision(Precision::bf16);
  f.context()->setHead(5);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.request.head == 5 && r.scale == 0.3 && r.precision == Precision::bf16;
  }));
  // Two more seconds with the case analysis on a worker thread (unless it is done already):
  // waiting for its end would only measure how busy the machine is.
  QVERIFY(waitUntil([&] {
    return f.window->analysis()->runningJobs() > 0 || summaryFor(*f.window, "/healthy_b2_h8_s1024");
  }));
  QTest::qWait(2000);
  watchdog.stop();
  // Generous margin: drawing a result takes tens of ms; computing one takes far longer.
  qInfo("worst event-loop gap during recompute: %lld ms", worstGap);
  QVERIFY2(worstGap < 1500, qPrintable(QStringLiteral("event loop blocked %1 ms").arg(worstGap)));
}

}  // namespace attnscope::test
