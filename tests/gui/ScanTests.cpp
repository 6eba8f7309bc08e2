// Entry point of the scan tests and the cancel test on a 400-case dump: Esc (the overview's
// Cancel shortcut) stops the series job after far fewer cases than the dump holds, no CPU work
// goes on afterwards, and Rescan then computes every case exactly. The (step x layer) overview
// fills in as cases finish: after each delivery of the series its valued cells are exactly the
// finished cases, the others grey.
#include <QApplication>
#include <QProgressBar>
#include <QSettings>
#include <QSignalSpy>
#include <QStandardPaths>
#include <QToolButton>
#include <QtTest>
#include <algorithm>
#include <memory>

#include "app/gui/AnalysisController.h"
#include "app/gui/MainWindow.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/OverviewPanel.h"
#include "app/panels/PanelReveal.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/ScanDump.h"
#include "tests/gui/ScanTest.h"

namespace attnscope::test {

Watchdog::Watchdog() {
  timer_.setInterval(10);
  QObject::connect(&timer_, &QTimer::timeout, [this] {
    const qint64 now = clock_.elapsed();
    if (now - last_ > worst_) {
      worst_ = now - last_;
      worstEnd_ = now;
    }
    last_ = now;
  });
  restart();
  timer_.start();
}

void Watchdog::restart() {
  clock_.restart();
  last_ = 0;
  worst_ = 0;
  worstEnd_ = 0;
}

void showCollectingErrors(MainWindow& window, QStringList& errors) {
  window.setErrorHandler([&errors](const QString& title, const QString& message, const QString&) {
    errors << title + QStringLiteral(": ") + message;
  });
  window.resize(1400, 900);
  window.show();
}

void ScanTest::initTestCase() {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("attnscope-tests"));
  QCoreApplication::setApplicationName(QStringLiteral("attnscope-scan-tests"));
  QVERIFY(settingsDir_.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir_.path());
}

void ScanTest::cancel_stops_series_work_and_rescan_completes() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  ScanDumpSpec spec;  // [1, 2, 256, 64] cases, NaN in cases 0 and 100
  spec.cases = 400;   // far more than run while Esc is clicked; the rescan computes every one
  const std::string path = dir.filePath(QStringLiteral("scan.h5")).toStdString();
  std::string error;
  QVERIFY2(writeScanDump(path, spec, &error), error.c_str());

  MainWindow window;
  QStringList errors;
  showCollectingErrors(window, errors);
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  QVERIFY(
      window.openTarget({QString::fromStdString(path), QString::fromStdString(scanCasePath(0))}));
  window.scans()->cancel();  // the badge scan of every case is not what this test is about
  AnalysisController* analysis = window.analysis();
  OverviewPanel* overview = window.overview();
  revealPanel(overview);  // the Overview page, as a click on its tab

  // Esc as the user presses it. Cancel's shortcut is a window shortcut: it fires only while its
  // window is the active one (the offscreen platform activates a window only on request), and a
  // button's shortcut clicks it by animateClick(), whose release comes from the event loop.
  window.activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(&window));
  // The series job (one unit = one case) is under way; cancel it as the user would.
  QVERIFY(waitUntil([&] { return analysis->casesAnalysed() >= 5; }, 120000));
  QCOMPARE(analysis->seriesTotal(), spec.cases);
  QVERIFY(overview->cancelButton()->isVisible());
  QCOMPARE(overview->cancelButton()->shortcut(), QKeySequence(Qt::Key_Escape));
  QVERIFY(overview->scanProgress()->maximum() == spec.cases);
  QSignalSpy clicked(overview->cancelButton(), &QAbstractButton::clicked);
  int at_click = -1;  // read after the button's own slot has cancelled the jobs
  connect(overview->cancelButton(), &QAbstractButton::clicked, this,
          [&] { at_click = analysis->casesAnalysed(); });
  QTest::keyClick(&window, Qt::Key_Escape);
  QVERIFY(clicked.wait(5000));
  QVERIFY(!analysis->busy());
  // Every job returns at its next poll: at most the unit in flight is finished. (How many
  // cases ran before the click depends on the CPU's speed, not on the cancel.)
  QVERIFY(waitUntil([&] { return analysis->runningJobs() == 0; }, 60000));
  const int processed = analysis->casesAnalysed();
  qInfo("cases analysed: %d at the click, %d when the series job stopped, of %d", at_click,
        processed, spec.cases);
  QVERIFY2(at_click >= 5 && processed <= at_click + 1,
           qPrintable(QString("%1 at the click, %2 after").arg(at_click).arg(processed)));
  QVERIFY(processed < spec.cases);
  QTest::qWait(300);
  QCOMPARE(analysis->casesAnalysed(), processed);  // no CPU work left behind
  QCOMPARE(analysis->runningJobs(), 0);
  QVERIFY(!analysis->series());  // the cancelled job delivered nothing
  QVERIFY(!overview->cancelButton()->isVisible());
  QVERIFY(overview->rescanButton()->isVisible());

  // A fresh analysis afterwards runs to the end with exact results.
  overview->rescanButton()->click();
  QVERIFY(analysis->busy());
  QVERIFY(waitUntil([&] { return analysis->series() && !analysis->busy(); }, 600000));
  const auto series = analysis->series();
  QCOMPARE(static_cast<int>(series->cases.size()), spec.cases);
  QCOMPARE(static_cast<int>(series->steps.size()), spec.cases);
  QVERIFY(series->layers == std::vector<int64_t>{0});
  QVERIFY(analysis->casesAnalysed() >= processed + spec.cases);
  for (int n = 0; n < spec.cases; ++n) {
    const SeriesCase& c = series->cases[static_cast<size_t>(n)];
    QCOMPARE(QString::fromStdString(c.path), QString::fromStdString(scanCasePath(n)));
    QCOMPARE(c.step, int64_t{n});
    QCOMPARE(c.metrics[static_cast<int>(Metric::nonfinite)],
             static_cast<double>(expectedNonfinite(spec, n)));
  }
  QCOMPARE(expectedNonfinite(spec, 100), int64_t{256 * 65});
  // Same max |S| as one direct run of a case at the same settings.
  Result<CaseData> data = window.context()->reader()->load(scanCasePath(7));
  QVERIFY(data.ok());
  SummarySettings settings;
  settings.run.precision = Precision::f32;
  const Result<HeadMetrics> direct = case_metrics(*data, settings);
  QVERIFY(direct.ok());
  QCOMPARE(series->cases[7].metrics[static_cast<int>(Metric::max_abs_s)],
           direct->aggregate(Metric::max_abs_s));
  QVERIFY2(errors.isEmpty(), qPrintable(errors.join(QLatin1Char('\n'))));
}

void ScanTest::overview_cells_fill_in_as_cases_finish() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const ScanDumpSpec spec;  // 300 cases: one (step x layer) column of 300 cells
  const std::string path = dir.filePath(QStringLiteral("scan.h5")).toStdString();
  std::string error;
  QVERIFY2(writeScanDump(path, spec, &error), error.c_str());
  MainWindow window;
  QStringList errors;
  showCollectingErrors(window, errors);
  QVERIFY(QTest::qWaitForWindowExposed(&window));
  AnalysisController* analysis = window.analysis();
  OverviewPanel* overview = window.overview();

  // After every delivery of the series (connected after the panel, so the map shows it): the
  // cases finished, and the map's cells holding a value and grey (masked) ones.
  struct Seen {
    int finished = 0, valued = 0, grey = 0, cells = 0;
  };
  std::vector<Seen> seen;
  QObject::connect(analysis, &AnalysisController::seriesChanged, [&] {
    const auto series = analysis->series();
    const MatrixGrid* grid = overview->seriesMap()->grid();
    if (!series || grid == nullptr) return;
    Seen s;
    for (const SeriesCase& c : series->cases) s.finished += c.state == SeriesState::done;
    for (const CellClass cls : grid->cls) {
      s.valued += cls != CellClass::masked;
      s.grey += cls == CellClass::masked;
    }
    s.cells = static_cast<int>(grid->cls.size());
    seen.push_back(s);
  });
  QVERIFY(
      window.openTarget({QString::fromStdString(path), QString::fromStdString(scanCasePath(0))}));
  window.scans()->cancel();  // the badge scan is not what this test is about
  // A partial delivery with some cases finished (shown at most every 250 ms while they run).
  QVERIFY(waitUntil([&] { return !seen.empty() && seen.back().finished > 0; }, 300000));
  QVERIFY(analysis->busy());
  overview->cancelButton()->click();
  QVERIFY(waitUntil([&] { return analysis->runningJobs() == 0; }, 60000));

  // The first delivery is all grey; each later one shows exactly the finished cases, grey for
  // the others, and never fewer than before; the partial one has both.
  QVERIFY(seen.size() >= 2);
  QCOMPARE(seen.front().valued, 0);
  QCOMPARE(seen.front().grey, spec.cases);
  int before = 0;
  bool partial = false;
  for (const Seen& s : seen) {
    QCOMPARE(s.cells, spec.cases);
    QCOMPARE(s.valued, s.finished);
    QCOMPARE(s.valued + s.grey, spec.cases);
    QVERIFY(s.valued >= before);
    before = s.valued;
    partial = partial || (s.valued > 0 && s.grey > 0);
  }
  QVERIFY(partial);
  QVERIFY2(errors.isEmpty(), qPrintable(errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test

QTEST_MAIN(attnscope::test::ScanTest)
