// The Health page (issue 45) on real recordings of tests/realmodel/instability_run.py: a
// statistics-only dump (the control run, finite) opens on the Health page with its heads and
// no warning; the unstable run opens on its non-finite case, its Health page lists the
// logit_growth warning first with the head's trend, and a click on the map cell of that step
// and layer opens the case.
#include <QListWidget>
#include <QProcess>
#include <QProcessEnvironment>
#include <QTabWidget>
#include <QtTest>

#include "app/gui/SessionContext.h"
#include "app/panels/HealthPanel.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/TrendPlotView.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {
namespace {

// Records instability_run.py at `rate` for at most `steps` steps into `out`.
bool record(const QString& out, const QString& rate, int steps) {
  QProcess run;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("PYTHONPATH"), QStringLiteral(ATTNSCOPE_RECORDER));
  env.insert(QStringLiteral("HF_HUB_OFFLINE"), QStringLiteral("1"));
  env.insert(QStringLiteral("OMP_NUM_THREADS"), QStringLiteral("1"));
  run.setProcessEnvironment(env);
  run.start(QStringLiteral(ATTNSCOPE_PYTHON),
            {QStringLiteral(ATTNSCOPE_INSTABILITY_RUN), out, QStringLiteral("--rate"), rate,
             QStringLiteral("--steps"), QString::number(steps)});
  if (!run.waitForFinished(300000) || run.exitCode() != 0) {
    qWarning() << run.readAllStandardError();
    return false;
  }
  return true;
}

QString currentPage(const ShownWindow& w) {
  return w.window->pages()->tabText(w.window->pages()->currentIndex());
}

}  // namespace

void ViewGapTest::health_page_leads_to_the_head_that_overflows() {
  QTemporaryDir out;
  QVERIFY(out.isValid());
  const QString control = out.filePath(QStringLiteral("control.h5"));
  QVERIFY(record(control, QStringLiteral("0.01"), 60));
  {
    ShownWindow w;
    QVERIFY(!w.window->openTarget({control, QString()}));  // no case to select
    HealthPanel* health = w.window->healthPanel();
    QVERIFY(waitShown([&] { return health->report() != nullptr; }));
    QCOMPARE(currentPage(w), QStringLiteral("Health"));
    QCOMPARE(health->report()->series.size(), size_t{8});  // 2 layers x 4 heads
    QCOMPARE(health->report()->last_step, int64_t{59});
    QVERIFY(!health->report()->predicts_failure());
    QVERIFY(health->map()->grid() != nullptr);
    QCOMPARE(health->map()->grid()->rows, int64_t{60});
    QVERIFY(health->trend()->curveCount() >= 1);
    QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
  }

  const QString unstable = out.filePath(QStringLiteral("unstable.h5"));
  QVERIFY(record(unstable, QStringLiteral("0.05"), 1000));  // non-finite before, on any CPU
  ShownWindow w;
  QVERIFY(w.window->openTarget({unstable, QString()}));
  HealthPanel* health = w.window->healthPanel();
  QVERIFY(waitShown([&] { return health->report() != nullptr; }));
  const HealthReport& r = *health->report();
  QVERIFY(r.first_nonfinite);
  QVERIFY(!r.warnings.empty());
  const HealthWarning& first = r.warnings.front();
  QCOMPARE(QString::fromStdString(first.kind), QStringLiteral("logit_growth"));
  QVERIFY(first.within_horizon);
  QCOMPARE(health->selectedSeries(), static_cast<int>(first.series));
  QVERIFY(health->warningList()->count() == static_cast<int>(r.warnings.size()));
  QVERIFY(health->warningList()->item(0)->text().startsWith(QStringLiteral("warning")));
  QVERIFY(health->trend()->curveCount() >= 4);  // measured, trend, band
  QVERIFY(health->trend()->markerLabels().join(' ').contains(QStringLiteral("first warning")));

  // The cell of the failing step in the column of the first failing head opens its case (the
  // other layer's case shown before).
  const int column = static_cast<int>(r.first_nonfinite->series);
  const HealthSeries& failing = r.series[static_cast<size_t>(column)];
  const QString step =
      QStringLiteral("/step_%1").arg(r.first_nonfinite->step, 6, 10, QLatin1Char('0'));
  const QString expected =
      step + QStringLiteral("/layer_%1").arg(failing.layer, 2, 10, QLatin1Char('0'));
  const QString other =
      step + QStringLiteral("/layer_%1").arg(1 - failing.layer, 2, 10, QLatin1Char('0'));
  QVERIFY(w.context()->selectCase(0, other));
  QCOMPARE(w.context()->casePath(), other);
  health->map()->clickCell(health->map()->grid()->total_rows - 1, column);
  QVERIFY(waitShown([&] { return w.context()->casePath() == expected; }));
  QCOMPARE(health->selectedSeries(), column);
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
