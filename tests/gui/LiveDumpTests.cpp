// A dump a training run keeps recording into while the window shows it (issue 21):
// attnscope_record (the venv's torch) writes step 0, then steps 1-3 (one with a NaN in q)
// while the window is open on step 0; the browser lists each new step as it lands, the scan badges
// fill in (the NaN step's says so), and the case on screen stays selected.
#include <QProcess>
#include <QProcessEnvironment>
#include <QtTest>

#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/DumpBrowserPanel.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {
namespace {

QString stepCase(int n) {
  return QStringLiteral("/step_%1/layer_00").arg(n, 6, 10, QLatin1Char('0'));
}

}  // namespace

void ViewGapTest::dump_recorded_while_open_fills_in() {
  QTemporaryDir out;
  QVERIFY(out.isValid());
  const QString dump = out.filePath(QStringLiteral("run.h5"));
  QProcess run;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("PYTHONPATH"), QStringLiteral(ATTNSCOPE_RECORDER));
  env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
  run.setProcessEnvironment(env);
  // One recording run: step 0, then (after a line on stdin) steps 1-3, step 2 with a NaN.
  run.start(QStringLiteral(ATTNSCOPE_PYTHON), {QStringLiteral(ATTNSCOPE_RECORD_LIVE_RUN), dump});
  QVERIFY(run.waitForReadyRead(120000));
  QCOMPARE(run.readLine().trimmed(), QByteArray("step 0 written"));

  ShownWindow w;
  QVERIFY(w.window->openTarget({dump, stepCase(0)}));
  QVERIFY(w.waitForHead(stepCase(0), 0));
  QCOMPARE(w.window->browser()->casePaths(0), QStringList{stepCase(0)});

  run.write("go\n");  // steps 1-3 are recorded while the window shows step 0
  QVERIFY(waitShown([&] { return run.state() == QProcess::NotRunning; }, 120000));
  QVERIFY2(run.exitCode() == 0, run.readAllStandardError().constData());
  QVERIFY(waitShown([&] { return w.window->browser()->casePaths(0).size() == 4; }, 30000));
  QCOMPARE(w.window->browser()->casePaths(0),
           (QStringList{stepCase(0), stepCase(1), stepCase(2), stepCase(3)}));
  QVERIFY(waitShown(
      [&] {
        const auto scan = w.window->scans()->scan(dump);
        return scan && scan->cases.size() == 4 && scan->complete();
      },
      60000));
  for (int n : {0, 1, 3}) {
    QCOMPARE(w.window->browser()->caseStatus(0, stepCase(n)), QStringLiteral("no findings"));
  }
  QVERIFY2(w.window->browser()->caseStatus(0, stepCase(2)).contains(QStringLiteral("nonfinite")),
           qPrintable(w.window->browser()->caseStatus(0, stepCase(2))));
  QCOMPARE(w.context()->casePath(), stepCase(0));
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
