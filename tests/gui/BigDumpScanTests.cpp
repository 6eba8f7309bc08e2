// Issue 7 item 6: a dump of 2000 cases declaring 4.2 GB (float32 [1, 2, 1024, 64] q / k / v / do
// per case, chunked; only 16 rows per head written, so the file holds tens of MB and is fast to
// generate) is opened through the window (MainWindow::open: background probe + discovery, then
// the dump browser lists the cases) and scanned by the whole-dump (step x layer) job while an
// event-loop watchdog records the longest blocked interval; Cancel then stops the scan. The
// figures (generation, open, worst gaps, cases analysed) are printed.
#include <QFileInfo>
#include <QProgressBar>
#include <QToolButton>
#include <QtTest>
#include <optional>

#include "app/gui/AnalysisController.h"
#include "app/gui/DumpOpener.h"
#include "app/gui/MainWindow.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/DumpBrowserPanel.h"
#include "app/panels/OverviewPanel.h"
#include "app/panels/PanelReveal.h"
#include "tests/gui/ScanDump.h"
#include "tests/gui/ScanTest.h"

namespace attnscope::test {
namespace {

// Generous bounds on a blocked event loop. During the scan only drawing runs on the GUI thread
// (tens of ms); a scan there would block for minutes. During the open, the dump browser's
// listing of 2000 cases and the first case's selection run on the GUI thread once the reader
// arrives (0.1-0.14 s with the tree built detached; 1.06 s when rows were inserted one by one
// into the live tree); an open on the GUI thread blocked for 13-46 s on a loaded 2-core machine.
constexpr qint64 kMaxScanGapMs = 2000;
constexpr qint64 kMaxOpenGapMs = 5000;

}  // namespace

void ScanTest::big_dump_opens_and_scans_responsively_and_cancels() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  ScanDumpSpec spec;
  spec.cases = 2000;
  spec.seq = 1024;
  spec.written = 16;
  QCOMPARE(declaredBytes(spec), int64_t{4194304000});  // 3.9 GiB
  const QString path = dir.filePath(QStringLiteral("big.h5"));
  QElapsedTimer clock;
  clock.start();
  std::string error;
  QVERIFY2(writeScanDump(path.toStdString(), spec, &error), error.c_str());
  qInfo("generated %d cases declaring %lld bytes (%lld on disk) in %lld ms", spec.cases,
        static_cast<long long>(declaredBytes(spec)), QFileInfo(path).size(), clock.elapsed());

  MainWindow window;
  QStringList errors;
  showCollectingErrors(window, errors);
  QVERIFY(QTest::qWaitForWindowExposed(&window));

  // Open through the window as the command line, File > Open, recent files and drops do: the
  // event loop keeps turning during discovery, the status bar offers a cancel meanwhile.
  Watchdog watchdog;
  qint64 adoptedAt = -1;
  QObject::connect(window.context(), &SessionContext::filesChanged,
                   [&] { adoptedAt = watchdog.elapsedMs(); });
  std::optional<bool> outcome;
  clock.restart();
  window.open({path, QString::fromStdString(scanCasePath(0))}, [&](bool ok) { outcome = ok; });
  QVERIFY(window.opener()->busy());
  QVERIFY(!window.cancelOpenButton()->isHidden());
  QVERIFY(waitUntil([&] { return outcome.has_value(); }, 300000));
  QVERIFY(*outcome);
  QVERIFY(window.cancelOpenButton()->isHidden());
  QCOMPARE(window.context()->fileCount(), 1);
  QCOMPARE(window.context()->casePath(), QString::fromStdString(scanCasePath(0)));
  QCOMPARE(static_cast<int>(window.context()->reader()->cases().size()), spec.cases);
  QCOMPARE(window.browser()->casePaths(0).size(), spec.cases);
  const qint64 openMs = clock.elapsed(), openGap = watchdog.worstGapMs();
  qInfo(
      "open through the window: %lld ms, worst event-loop gap %lld ms ending at %lld ms (reader "
      "adopted and listed at %lld ms)",
      openMs, openGap, watchdog.worstEndMs(), adoptedAt);

  // The whole-dump scan: one unit per case, each a [1, 2, 1024, 64] forward + backward. The
  // badge scan (ScanController, a full analysis per case) is stopped: it is not under test here.
  window.scans()->cancel();
  AnalysisController* analysis = window.analysis();
  OverviewPanel* overview = window.overview();
  revealPanel(overview);  // the Overview page, as a click on its tab
  watchdog.restart();
  QVERIFY(waitUntil([&] { return analysis->casesAnalysed() >= 10; }, 600000));
  QCOMPARE(analysis->seriesTotal(), spec.cases);
  QVERIFY(overview->cancelButton()->isVisible());
  overview->cancelButton()->click();
  QVERIFY(!analysis->busy());
  QVERIFY(waitUntil([&] { return analysis->runningJobs() == 0; }, 120000));
  const qint64 scanGap = watchdog.worstGapMs();
  const int processed = analysis->casesAnalysed();
  qInfo("scan: %d of %d cases analysed before the cancel stopped it; worst event-loop gap %lld ms",
        processed, spec.cases, scanGap);
  QVERIFY2(processed < spec.cases / 10, qPrintable(QString::number(processed)));
  QVERIFY(!analysis->series());
  QVERIFY(overview->rescanButton()->isVisible());

  QVERIFY2(openGap < kMaxOpenGapMs, qPrintable(QStringLiteral("open blocked %1 ms").arg(openGap)));
  QVERIFY2(scanGap < kMaxScanGapMs, qPrintable(QStringLiteral("scan blocked %1 ms").arg(scanGap)));
  QVERIFY2(errors.isEmpty(), qPrintable(errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
