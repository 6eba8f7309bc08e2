// The window opens a real model's dump where its NaN starts (issue 40 item 2): all-MiniLM-L6-v2
// trained one fp16 step with massive activations in layer 2 (python/examples/minilm_dump.py
// --mode overflow) records layers 0-5 non-finite, layer 0 only through its gradients. Opened
// without a case, the window lands on the case, mode, tab, head and cell where
// `attnscope-cli scan` says the first NaN appears: layer 2's forward, S overflowing fp16.
#include <QDir>
#include <QJsonObject>
#include <QProcess>
#include <QTreeWidget>
#include <QtTest>
#include <algorithm>
#include <optional>

#include "app/gui/AnalysisController.h"
#include "app/gui/FindingNavigator.h"
#include "app/gui/SessionContext.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/OriginPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {

void ViewGapTest::minilm_overflow_dump_opens_where_its_nan_starts() {
  QTemporaryDir dir;
  const QString dump = dir.filePath(QStringLiteral("minilm_overflow.h5"));
  QProcess record;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert(QStringLiteral("HF_HUB_OFFLINE"), QStringLiteral("1"));
  record.setProcessEnvironment(env);
  record.start(QStringLiteral(ATTNSCOPE_PYTHON),
               {QStringLiteral(ATTNSCOPE_MINILM_DUMP), dump, QStringLiteral("--mode"),
                QStringLiteral("overflow")});
  QVERIFY(record.waitForFinished(600000));
  QVERIFY2(record.exitCode() == 0, record.readAllStandardError().constData());

  // What the CLI names: layer 2's forward, S of some head (head 0 here).
  const QJsonObject origin = cliScanJson(dump)
                                 .value(QStringLiteral("first_bad"))
                                 .toObject()
                                 .value(QStringLiteral("nonfinite_origin"))
                                 .toObject();
  const QString casePath = origin.value(QStringLiteral("path")).toString();
  const QJsonObject site = origin.value(QStringLiteral("site")).toObject();
  QCOMPARE(casePath, QStringLiteral("/step_000000/layer_02"));
  QCOMPARE(origin.value(QStringLiteral("side")).toString(), QStringLiteral("forward"));
  QCOMPARE(site.value(QStringLiteral("view")).toString(), QStringLiteral("S"));
  const int head = site.value(QStringLiteral("head")).toInt();

  ShownWindow w;
  std::optional<CellReadout> pinned;
  QObject::connect(w.context(), &SessionContext::cellPinned,
                   [&](const CellReadout& r) { pinned = r; });
  QVERIFY(w.window->openTarget({dump, {}}));
  QVERIFY(waitShown(
      [&] {
        return w.context()->casePath() == casePath && w.context()->head() == head &&
               w.context()->effectiveMode() == Mode::unfused &&
               w.window->heatmaps()->currentView()->name() == QStringLiteral("S") &&
               !w.window->findingNavigator()->leading() && pinned.has_value();
      },
      180000));
  // The cell: the first non-finite score of that head (row-major), +inf from the overflow.
  QVERIFY(w.waitForHead(casePath, head));
  const MatrixGrid& s = *w.context()->result()->s;
  const auto first = std::find_if(s.cls.begin(), s.cls.end(), [](CellClass c) {
    return c != CellClass::finite && c != CellClass::masked;
  });
  QVERIFY(first != s.cls.end());
  QCOMPARE(pinned->row, (first - s.cls.begin()) / s.cols + s.row_edges.front());
  QCOMPARE(pinned->col, (first - s.cls.begin()) % s.cols + s.col_edges.front());
  // The findings list marks the overflow; the Origin list starts there and lists layer 0 only
  // for its backward.
  const auto summary = w.window->analysis()->summary();
  const int current = w.window->findingNavigator()->current();
  QVERIFY(summary && current >= 0);
  QCOMPARE(summary->findings[static_cast<size_t>(current)].kind, FindingKind::score_overflow);
  QTreeWidget* list = w.window->origin()->list();
  QVERIFY(list->topLevelItemCount() > 0);
  QVERIFY2(list->topLevelItem(0)->text(0).contains(QStringLiteral("layer 2, forward")),
           qPrintable(list->topLevelItem(0)->text(0)));
  for (int i = 0; i < list->topLevelItemCount(); ++i) {
    const QString place = list->topLevelItem(i)->text(0);
    QVERIFY2(!place.contains(QStringLiteral("layer 0, forward")), qPrintable(place));
  }
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
