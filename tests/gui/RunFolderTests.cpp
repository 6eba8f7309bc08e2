// A run folder of two rank dumps (root attributes rank / world_size / host, as attnscope_record
// writes them under torch.distributed), opened as File > Open Folder… does and dropped on the
// dump browser: the tree is run folder -> rank N (host, file) -> steps -> layers in rank order
// (the rank attribute wins over the file name), a rank 1 case opens like any case, the
// (step x layer) overview has an outlined block of rows per rank, named on its row axis, with
// each rank's own values, a folder without a dump is refused with the reason, and the lead
// goes to the run's first bad case, on whichever rank.
#include <qcustomplot.h>
#include <QAction>
#include <QDir>
#include <QDropEvent>
#include <QMimeData>
#include <QTreeWidget>
#include <QUrl>
#include <QtTest>
#include <cmath>
#include <optional>

#include "app/gui/AnalysisController.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "app/panels/DumpBrowserPanel.h"
#include "app/panels/OverviewPanel.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/HeatmapView.h"
#include "core/io/hdf5_dump.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {
namespace {

constexpr int64_t kSq = 3, kSk = 4, kD = 2;  // B = H = 1

// Where a rank dump holds its NaN: v[0] of /step_00S/layer_0L.
struct NanAt {
  int step, layer;
};

// /step_00S/layer_0L, S and L in {0, 1}, with a NaN in v[0] when `nan` is true.
CaseData rankCase(int step, int layer, bool nan) {
  CaseData c;
  c.info.path = "/step_00" + std::to_string(step) + "/layer_0" + std::to_string(layer);
  c.info.config.step = step;
  c.info.config.layer = layer;
  c.info.config.dtype = "float32";
  c.info.dims = {1, 1, 1, kSq, kSk, kD, kD};
  const int seed = 2 * step + layer;
  const auto t = [](int64_t rows, int s, bool poisoned) {
    std::vector<double> v = tensorValues(rows * kD, s);
    if (poisoned) v[0] = std::nan("");
    return HostTensor::from_double(DType::f32, {1, 1, rows, kD}, v);
  };
  c.tensors["q"] = t(kSq, seed, false);
  c.tensors["k"] = t(kSk, seed + 1, false);
  c.tensors["v"] = t(kSk, seed + 2, nan);
  c.tensors["do"] = t(kSq, seed + 3, false);
  return c;
}

// A rank's dump: four cases, a NaN where `nan` says (default: rank 1's /step_001/layer_00),
// the rank's root attributes.
bool writeRankDump(const QString& path, int rank, const std::string& host,
                   std::optional<NanAt> nan = std::nullopt) {
  if (!nan && rank == 1) nan = NanAt{1, 0};
  Result<DumpWriter> w = DumpWriter::create(path.toStdString());
  if (!w) return false;
  for (int step = 0; step < 2; ++step) {
    for (int layer = 0; layer < 2; ++layer) {
      const CaseData c = rankCase(step, layer, nan && nan->step == step && nan->layer == layer);
      if (!w->write_case(c.info.path, c)) return false;
    }
  }
  const Status root =
      w->write_attributes("/", {{"rank", double(rank)}, {"world_size", 2.0}, {"host", host}});
  return root && static_cast<bool>(w->close());
}

// The labels of an item's children.
QStringList childLabels(const QTreeWidgetItem* item) {
  QStringList out;
  for (int i = 0; i < item->childCount(); ++i) out << item->child(i)->text(0);
  return out;
}

// The run folder's item holds rank 0 then rank 1 (labels given), each with steps 0 and 1 of
// layers 0 and 1.
void checkRunTree(DumpBrowserPanel* browser, const QString& run, const QStringList& ranks) {
  QTreeWidget* tree = browser->tree();
  QCOMPARE(tree->topLevelItemCount(), 1);
  const QTreeWidgetItem* top = tree->topLevelItem(0);
  QCOMPARE(top->text(0), QFileInfo(run).fileName());
  QCOMPARE(top->text(1), QStringLiteral("2 rank(s)"));
  QCOMPARE(childLabels(top), ranks);
  for (int r = 0; r < 2; ++r) {
    const QTreeWidgetItem* rank = top->child(r);
    QVERIFY(rank->isExpanded());
    QCOMPARE(childLabels(rank), QStringList({QStringLiteral("step 0"), QStringLiteral("step 1")}));
    for (int s = 0; s < 2; ++s) {
      QCOMPARE(childLabels(rank->child(s)),
               QStringList({QStringLiteral("layer 0"), QStringLiteral("layer 1")}));
    }
  }
}

// The open file of rank `rank`; -1 when none.
int fileOfRank(const SessionContext* context, int64_t rank) {
  for (int f = 0; f < context->fileCount(); ++f) {
    if (context->file(f).run.rank == rank) return f;
  }
  return -1;
}

// Waits until both ranks are open and the lead reached the run's first bad case: rank 1's
// /step_001/layer_00 with the default NaNs.
bool waitForRun(const ShownWindow& w, int64_t rank = 1,
                const QString& casePath = QStringLiteral("/step_001/layer_00")) {
  return waitShown([&] {
    const SessionContext* c = w.context();
    return c->fileCount() == 2 && c->fileIndex() == fileOfRank(c, rank) &&
           c->casePath() == casePath;
  });
}

}  // namespace

void ViewGapTest::run_folder_opens_as_one_run() {
  QTemporaryDir dir;
  const QString run = dir.filePath(QStringLiteral("nan_hunt"));
  QVERIFY(QDir().mkpath(run));
  QVERIFY(writeRankDump(run + QStringLiteral("/rank_00000.h5"), 0, "node-a"));
  QVERIFY(writeRankDump(run + QStringLiteral("/rank_00001.h5"), 1, "node-b"));
  ShownWindow w;
  const auto* action = w.window->findChild<QAction*>(QStringLiteral("openFolderAction"));
  QVERIFY(action != nullptr);
  QCOMPARE(action->shortcut(), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  w.window->browser()->openFiles({run});  // what the action does with the chosen folder
  QVERIFY(waitForRun(w));
  checkRunTree(w.window->browser(), run,
               {QStringLiteral("rank 0 (node-a, rank_00000.h5)"),
                QStringLiteral("rank 1 (node-b, rank_00001.h5)")});
  if (QTest::currentTestFailed()) return;
  QCOMPARE(w.context()->recentFiles().value(0), QFileInfo(run).absoluteFilePath());

  // Rank 1's poisoned case, selected in the tree, is computed like any case.
  SessionContext* context = w.context();
  const int rank1 = fileOfRank(context, 1);
  QTreeWidgetItem* poisoned =
      w.window->browser()->tree()->topLevelItem(0)->child(1)->child(1)->child(0);
  w.window->browser()->tree()->setCurrentItem(poisoned);
  QCOMPARE(context->fileIndex(), rank1);
  QVERIFY(w.waitForHead(QStringLiteral("/step_001/layer_00"), 0,
                        [](const HeadResult& r) { return r.o.counts.nan > 0; }));
  QVERIFY(context->file(context->fileIndex()).path.endsWith(QStringLiteral("rank_00001.h5")));

  // The overview: rows of rank 0's steps, then rank 1's, each block outlined and named; only
  // rank 1's (step 1, layer 0) cell counts non-finite values.
  AnalysisController* analysis = w.window->analysis();
  QVERIFY(waitShown([&] {
    const auto s = analysis->series();
    return s && s->done == 8 && !analysis->seriesRunner()->busy();
  }));
  QCOMPARE(analysis->series()->ranks, (std::vector<int64_t>{0, 1}));
  OverviewPanel* overview = w.window->overview();
  overview->setMetric(Metric::nonfinite);
  const MatrixGrid* g = overview->seriesMap()->grid();
  QVERIFY(g != nullptr && g->rows == 4 && g->cols == 2);
  for (size_t cell = 0; cell < 8; ++cell) {
    QCOMPARE(g->cls[cell], CellClass::finite);
    QCOMPARE(g->value[cell] > 0, cell == 3 * 2 + 0);  // rank 1, step 1, layer 0
  }
  const std::optional<MatrixWindow> shown = overview->seriesMap()->highlight();
  QVERIFY(shown && shown->row_begin == 3 && shown->col_begin == 0);
  QList<double> blockTops;
  for (const Annotation& a : AnnotationLayer::of(overview->seriesMap())->annotations()) {
    if (a.kind == AnnotationKind::box) blockTops << a.from.y();
  }
  QCOMPARE(blockTops, QList<double>({-0.5, 1.5}));
  const auto names =
      overview->seriesMap()->plot()->yAxis->ticker().dynamicCast<QCPAxisTickerText>();
  QVERIFY(names);
  QCOMPARE(names->ticks(),
           (QMap<double, QString>{{0, QStringLiteral("rank 0")}, {2, QStringLiteral("rank 1")}}));
  // A cell of rank 0's block opens that rank's case.
  overview->seriesMap()->clickCell(1, 1);
  QCOMPARE(context->fileIndex(), fileOfRank(context, 0));
  QCOMPARE(context->casePath(), QStringLiteral("/step_001/layer_01"));

  // The scan badges are per rank: the same case path is clean in rank 0, not in rank 1.
  QVERIFY(waitShown([&] { return !w.window->scans()->busy(); }));
  const QString clean =
      w.window->browser()->caseStatus(fileOfRank(context, 0), QStringLiteral("/step_001/layer_00"));
  const QString bad = w.window->browser()->caseStatus(rank1, QStringLiteral("/step_001/layer_00"));
  QVERIFY2(!clean.isEmpty() && !clean.contains(QStringLiteral("nonfinite")), qPrintable(clean));
  QVERIFY2(bad.contains(QStringLiteral("nonfinite_output")), qPrintable(bad));
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

void ViewGapTest::dropped_run_folder_orders_ranks_by_attribute() {
  QTemporaryDir dir;
  const QString run = dir.filePath(QStringLiteral("gathered"));
  QVERIFY(QDir().mkpath(run));
  // Names in the other order than the ranks: the rank attribute decides.
  QVERIFY(writeRankDump(run + QStringLiteral("/gpu_a.h5"), 1, "node-b"));
  QVERIFY(writeRankDump(run + QStringLiteral("/gpu_b.h5"), 0, "node-a"));
  ShownWindow w;
  DumpBrowserPanel* browser = w.window->browser();
  QMimeData mime;
  mime.setUrls({QUrl::fromLocalFile(run)});
  const QPointF at(browser->width() / 2.0, browser->height() / 2.0);
  QDragEnterEvent enter(at.toPoint(), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(browser, &enter);
  QVERIFY(enter.isAccepted());
  QDropEvent drop(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(browser, &drop);
  QVERIFY(drop.isAccepted());
  QVERIFY(waitForRun(w));
  checkRunTree(
      browser, run,
      {QStringLiteral("rank 0 (node-a, gpu_b.h5)"), QStringLiteral("rank 1 (node-b, gpu_a.h5)")});
  if (QTest::currentTestFailed()) return;
  QVERIFY(w.context()->file(w.context()->fileIndex()).path.endsWith(QStringLiteral("gpu_a.h5")));
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
  // A folder without a dump is refused with the reason; what is open stays.
  const QString empty = dir.filePath(QStringLiteral("empty"));
  QVERIFY(QDir().mkpath(empty));
  QVERIFY(!w.window->openTarget({empty, {}}));
  QCOMPARE(w.errors.size(), 1);
  QVERIFY2(w.errors[0].contains(QStringLiteral("no dump in this folder")), qPrintable(w.errors[0]));
  QCOMPARE(w.context()->fileCount(), 2);
}

// Rank 0 fails at step 1, rank 1 already at step 0: the lead skips rank 0's error (the first
// in the lowest rank's file) for the run's first bad case, as `attnscope-cli scan` names it.
void ViewGapTest::run_folder_leads_to_the_runs_first_bad_case() {
  QTemporaryDir dir;
  const QString run = dir.filePath(QStringLiteral("two_faults"));
  QVERIFY(QDir().mkpath(run));
  QVERIFY(writeRankDump(run + QStringLiteral("/rank_00000.h5"), 0, "node-a", NanAt{1, 0}));
  QVERIFY(writeRankDump(run + QStringLiteral("/rank_00001.h5"), 1, "node-b", NanAt{0, 1}));
  ShownWindow w;
  QVERIFY(w.window->openTarget({run, {}}));
  QVERIFY(waitForRun(w, 1, QStringLiteral("/step_000/layer_01")));
  // Rank 0's own error is there (its badge), just later in the run.
  const QString rank0 = w.window->browser()->caseStatus(fileOfRank(w.context(), 0),
                                                        QStringLiteral("/step_001/layer_00"));
  QVERIFY2(rank0.contains(QStringLiteral("nonfinite")), qPrintable(rank0));
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
