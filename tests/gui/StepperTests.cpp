// The backward stepper in the real window: F10 / Shift+F10 move one step and outline the
// step's tile on every heatmap, F5 lands on the tile an independently driven BackwardStepper
// finds first non-finite, and the stepper panel shows that tile's intermediates. The stepper,
// head compute, case summary and scale sweep of one selected case read it from the file once.
// The stepper is the view (issue 40 item 3): it walks the unfused kernel's stages when that
// kernel is on screen, F5 goes on through the case's other heads and says where it stopped,
// and nothing of its titles outlives a change of case.
#include <QStatusBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <optional>

#include "app/gui/AnalysisController.h"
#include "app/gui/ComputeWorker.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/StepperController.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/StepperPanel.h"
#include "app/plot/HeatmapView.h"
#include "kernels/cpu/backward_stepper.h"
#include "tests/gui/GuiTest.h"
#include "tests/gui/ScanDump.h"

namespace attnscope::test {
namespace {

// The reference walk: a BackwardStepper over the whole case at (b, h), as the CLI drives it.
struct ReferenceWalk {
  CaseInputs inputs;
  std::optional<KernelInputs> kin;
  CpuAttnResult fwd;
  std::unique_ptr<BackwardStepper> stepper;

  ReferenceWalk(const QString& casePath, int64_t b, int64_t h) {
    Result<DumpReader> reader = DumpReader::open(samplePath().toStdString());
    Result<CaseData> data = reader->load(casePath.toStdString());
    inputs = std::move(make_case_inputs(*data, RunChoice{}, InputValues::none)).value();
    kin.emplace(*data);
    const CpuAttnInputs in = kin->view();
    fwd = cpu_attention(inputs.params, CpuAttnOptions{}, in);
    stepper = std::make_unique<BackwardStepper>(
        inputs.params, CpuAttnOptions{}, in,
        CpuForwardView{fwd.o.data(), fwd.m.data(), fwd.l.data()}, b, h);
  }
};

bool waitForPosition(StepperController* s, int64_t position) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < 60000) {
    QTest::qWait(10);
    if (!s->busy() && s->snapshot() && s->snapshot()->position == position) return true;
  }
  return false;
}

void pressKey(MainWindow& w, Qt::Key key, Qt::KeyboardModifiers mods = Qt::NoModifier) {
  QTest::keyClick(&w, key, mods);
}

}  // namespace

void GuiTest::stepper_keys_step_and_highlight_tile() {
  WindowFixture f;
  f.window->activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(f.window.get()));
  QVERIFY(f.window->openTarget({samplePath(), kPaddingCase}));
  f.context()->setBatch(1);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.request.batch == 1; }));
  StepperController* stepper = f.window->stepper();
  ReferenceWalk ref(kPaddingCase, 1, 0);

  pressKey(*f.window, Qt::Key_F10);
  QVERIFY(waitForPosition(stepper, 1));
  QCOMPARE(stepper->snapshot()->step.stage, StepStage::backward_preprocess);
  QCOMPARE(stepper->snapshot()->size, ref.stepper->size());
  pressKey(*f.window, Qt::Key_F10);
  QVERIFY(waitForPosition(stepper, 2));
  const StepInfo expected = ref.stepper->describe(1);
  QCOMPARE(expected.stage, StepStage::score_tile);
  const StepInfo& got = stepper->snapshot()->step;
  QCOMPARE(got.stage, expected.stage);
  QCOMPARE(got.q_tile, expected.q_tile);
  QCOMPARE(got.kv_tile, expected.kv_tile);
  // Every heatmap outlines the tile: the score block on S / dS, its query rows on O / dQ, its
  // keys on dK.
  HeatmapPanel* maps = f.window->heatmaps();
  QCOMPARE(*maps->view(HeadView::s)->highlight(), expected.window);
  QCOMPARE(*maps->view(HeadView::ds)->highlight(), expected.window);
  const MatrixWindow rows{expected.window.row_begin, expected.window.row_end, 0, 64};
  QCOMPARE(*maps->view(HeadView::dq)->highlight(), rows);
  const MatrixWindow keys{expected.window.col_begin, expected.window.col_end, 0, 64};
  QCOMPARE(*maps->view(HeadView::dk)->highlight(), keys);
  QVERIFY(f.window->stepperPanel()->summary().contains(QStringLiteral("score_tile")));
  // The tile's scores are shown at their absolute indices.
  const MatrixGrid* tileS = f.window->stepperPanel()->view(QStringLiteral("tile S"))->grid();
  QVERIFY(tileS != nullptr);
  QCOMPARE(tileS->row_edges.front(), expected.window.row_begin);
  QCOMPARE(tileS->rows, expected.window.row_end - expected.window.row_begin);

  pressKey(*f.window, Qt::Key_F10, Qt::ShiftModifier);
  QVERIFY(waitForPosition(stepper, 1));
  QCOMPARE(stepper->snapshot()->step.stage, StepStage::backward_preprocess);
  // The D accumulator after preprocess: rows 70-95 of batch 1 are fully padded -> NaN.
  const MatrixGrid* d = f.window->stepperPanel()->view(QStringLiteral("D"))->grid();
  QVERIFY(d != nullptr);
  QCOMPARE(d->counts.nan, int64_t{26});
  QVERIFY(std::isnan(d->raw[70]) && std::isfinite(d->raw[69]));
}

void GuiTest::run_to_next_nonfinite_lands_on_known_tile() {
  WindowFixture f;
  f.window->activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(f.window.get()));
  QVERIFY(f.window->openTarget({samplePath(), kPaddingCase}));
  f.context()->setBatch(1);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.request.batch == 1; }));
  StepperController* stepper = f.window->stepper();
  ReferenceWalk ref(kPaddingCase, 1, 0);
  // Independently: the first two steps that make something non-finite.
  QVERIFY(ref.stepper->run_to_next_nonfinite());
  const int64_t first = ref.stepper->position();
  QVERIFY(ref.stepper->run_to_next_nonfinite());
  const int64_t second = ref.stepper->position();
  const StepperState expected = ref.stepper->current();
  QCOMPARE(first, int64_t{1});  // D = rowsum(dO * O) is NaN on the padded rows
  QVERIFY(expected.step.q_tile >= 0);

  pressKey(*f.window, Qt::Key_F5);
  QVERIFY(waitForPosition(stepper, first));
  QVERIFY(stepper->snapshot()->found);
  pressKey(*f.window, Qt::Key_F5);
  QVERIFY(waitForPosition(stepper, second));
  const StepperSnapshot& snap = *stepper->snapshot();
  QVERIFY(snap.found);
  QCOMPARE(snap.step.stage, expected.step.stage);
  QCOMPARE(snap.step.q_tile, expected.step.q_tile);
  QCOMPARE(snap.step.kv_tile, expected.step.kv_tile);
  QCOMPARE(snap.step.new_nonfinite, expected.step.new_nonfinite);
  QVERIFY(snap.step.window.row_end > 70);  // the tile holds padded query rows
  QCOMPARE(*f.window->heatmaps()->view(HeadView::p)->highlight(), expected.step.window);
  QCOMPARE(f.context()->stepTile().qTile, expected.step.q_tile);
  QVERIFY(f.window->stepperPanel()->summary().contains(QStringLiteral("stopped")));
  // The stepper's tabs show the matrix the stage made non-finite (not tile S).
  const QTabWidget* tabs = f.window->stepperPanel()->findChild<QTabWidget*>();
  const auto* shown = static_cast<const HeatmapView*>(tabs->currentWidget());
  QCOMPARE(expected.step.stage, StepStage::recompute_p);
  QCOMPARE(shown->name(), QStringLiteral("tile P"));
  QVERIFY(shown->overlayCounts().nonfinite() > 0);

  // A settings change keeps the position; restart clears the outline.
  f.context()->setMaskFill(MaskFill::safe);
  QTRY_VERIFY_WITH_TIMEOUT(!stepper->busy() && stepper->snapshot() &&
                               stepper->snapshot()->position == second &&
                               !stepper->snapshot()->found,
                           60000);
  stepper->restart();
  QVERIFY(!f.window->heatmaps()->view(HeadView::p)->highlight());
}

void GuiTest::every_consumer_of_a_selected_case_shares_one_read() {
  // A three-case dump of small heads: the background walks over it end quickly even when the
  // machine is busy (the series runs at background priority).
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("consumers.h5"));
  ScanDumpSpec spec;
  spec.cases = 3;
  spec.seq = spec.written = 64;
  spec.dim = 16;
  std::string error;
  QVERIFY2(writeScanDump(path.toStdString(), spec, &error), error.c_str());
  WindowFixture f;
  QVERIFY(f.window->openTarget({path, QString::fromStdString(scanCasePath(0))}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  // The dump scan and the step x layer series walk every case once; after them only the
  // selection reads.
  AnalysisController* analysis = f.window->analysis();
  QVERIFY(QTest::qWaitFor(
      [&] {
        const auto scan = f.window->scans()->scan(f.context()->file(0).path);
        const auto series = analysis->series();
        return scan && scan->complete() && series &&
               series->done == static_cast<int>(series->cases.size()) &&
               analysis->runningJobs() == 0;
      },
      120000));
  StepperController* stepper = f.window->stepper();
  analysis->setSweepEnabled(true);
  const std::shared_ptr<CaseCache> cases = f.context()->cases();
  QVERIFY(cases != nullptr);
  const size_t loadsBefore = cases->reader()->loads();
  const auto summaryBefore = analysis->summary();
  const auto sweepBefore = analysis->sweep();

  const QString other = QString::fromStdString(scanCasePath(2));
  QVERIFY(f.context()->selectCase(f.context()->fileIndex(), other));
  stepper->stepForward();
  QVERIFY(QTest::qWaitFor(
      [&] {
        const auto result = f.context()->result();
        const auto summary = analysis->summary();
        const auto sweep = analysis->sweep();
        return result && result->case_path == other.toStdString() && !f.window->worker()->busy() &&
               summary && summary != summaryBefore && summary->case_path == other.toStdString() &&
               sweep && sweep != sweepBefore && stepper->snapshot() && !stepper->busy() &&
               analysis->runningJobs() == 0;
      },
      120000));
  QCOMPARE(stepper->snapshot()->position, int64_t{1});
  QCOMPARE(cases->reader()->loads(), loadsBefore + 1);
}

void GuiTest::stepper_position_belongs_to_its_case() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kPaddingCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  StepperController* stepper = f.window->stepper();
  const int file = f.context()->fileIndex();
  stepper->seek(3);
  QVERIFY(waitForPosition(stepper, 3));
  QVERIFY(f.context()->stepTile().valid);

  // Another case starts unstepped: no snapshot, no tile outline, nothing from the first case.
  const QString other = QStringLiteral("/exploding_grad");
  QVERIFY(f.context()->selectCase(file, other));
  QCOMPARE(stepper->snapshot(), nullptr);
  QCOMPARE(stepper->target(), int64_t{0});
  QVERIFY(!f.context()->stepTile().valid);
  QVERIFY(waitForResult(*f.window,
                        [&](const HeadResult& r) { return r.case_path == other.toStdString(); }));
  QVERIFY(!stepper->busy());
  QCOMPARE(stepper->snapshot(), nullptr);
  stepper->stepForward();
  QVERIFY(waitForPosition(stepper, 1));

  // Back to the first case: its stepper stands where it was left, and so does the other's.
  QVERIFY(f.context()->selectCase(file, kPaddingCase));
  QVERIFY(waitForPosition(stepper, 3));
  QVERIFY(f.context()->stepTile().valid);
  QVERIFY(f.context()->selectCase(file, other));
  QVERIFY(waitForPosition(stepper, 1));

  // A restart forgets the case's position.
  stepper->restart();
  QVERIFY(f.context()->selectCase(file, kPaddingCase));
  QVERIFY(waitForPosition(stepper, 3));
  QVERIFY(f.context()->selectCase(file, other));
  QCOMPARE(stepper->snapshot(), nullptr);
  QTest::qWait(100);
  QCOMPARE(stepper->snapshot(), nullptr);
}

void GuiTest::stepper_walks_the_kernel_on_screen() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  f.context()->setHead(3);
  f.context()->setPrecision(Precision::f16);
  f.context()->setMode(Mode::unfused);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.request.head == 3 && r.request.mode() == Mode::unfused && r.gradients;
  }));
  // Unfused fp16 overflows S in head 3: F5 stops at the unfused run's S, never at a fused tile.
  std::optional<CellReadout> pinned;
  QObject::connect(f.context(), &SessionContext::cellPinned,
                   [&](const CellReadout& r) { pinned = r; });
  f.window->pages()->setCurrentIndex(4);  // the Stepper page: its tile plots have nothing here
  pressKey(*f.window, Qt::Key_F5);
  QVERIFY(waitUntil([&] {
    return f.window->stepperPanel()->summary().contains(QStringLiteral("stopped")) &&
           pinned.has_value();
  }));
  QCOMPARE(f.window->stepper()->snapshot(), nullptr);
  const QString summary = f.window->stepperPanel()->summary();
  QVERIFY2(summary.contains(QStringLiteral("unfused (eager) kernel of b0 h3, fp16")) &&
               summary.contains(QStringLiteral("stage 1 / 8 · S")) &&
               !summary.contains(QStringLiteral("+inf 0,")),
           qPrintable(summary));
  QCOMPARE(f.window->heatmaps()->currentView()->name(), QStringLiteral("S"));
  // The stage is a whole matrix: the heatmaps page comes to the front, the status bar says
  // where the stepper stands.
  QCOMPARE(f.window->pages()->currentIndex(), 0);
  const QString status = f.window->statusBar()->currentMessage();
  QVERIFY2(status.startsWith(QStringLiteral("stepper: unfused (eager) kernel")),
           qPrintable(status));
  QCOMPARE(QString::fromStdString(pinned->matrix), QStringLiteral("S"));
  QVERIFY(pinned->cls == CellClass::pos_inf);
  // F10 walks on to P: the next whole matrix of that kernel.
  pressKey(*f.window, Qt::Key_F10);
  QVERIFY(waitUntil([&] {
    return f.window->stepperPanel()->summary().contains(QStringLiteral("stage 2 / 8 · P"));
  }));
  QCOMPARE(f.window->heatmaps()->currentView()->name(), QStringLiteral("P"));
  // The fused kernel on screen: the stepper steps its tiles again.
  f.context()->setMode(Mode::fused);
  pressKey(*f.window, Qt::Key_F10);
  QVERIFY(waitUntil([&] {
    const auto snap = f.window->stepper()->snapshot();
    return snap && !f.window->stepper()->busy() && snap->head == 3;
  }));
  QVERIFY(f.window->stepper()->eagerText().isEmpty());
}

void GuiTest::run_to_nonfinite_searches_every_head() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kPaddingCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.request.batch == 0; }));
  // Batch 0 of the padded case is finite everywhere: F5 runs through its heads and stops in
  // batch 1, head 0, at its first step (D = rowsum(dO * O) over the NaN rows of O); the view
  // follows it there.
  pressKey(*f.window, Qt::Key_F5);
  QVERIFY(waitUntil([&] {
    const auto snap = f.window->stepper()->snapshot();
    return snap && !f.window->stepper()->busy() && snap->found;
  }));
  const auto snap = f.window->stepper()->snapshot();
  QCOMPARE(snap->batch, int64_t{1});
  QCOMPARE(snap->head, int64_t{0});
  QCOMPARE(snap->heads_searched, int64_t{3});
  QVERIFY(waitUntil([&] { return f.context()->batch() == 1 && f.context()->head() == 0; }));
  QVERIFY2(f.window->stepperPanel()->summary().contains(
               QStringLiteral("stopped in b1 h0 after 3 more head(s)")),
           qPrintable(f.window->stepperPanel()->summary()));
  // A case without any non-finite step: F5 says it ran through every head to the end.
  QVERIFY(f.context()->selectCase(0, QStringLiteral("/healthy_b2_h8_s1024")));
  QVERIFY(waitForResult(*f.window,
                        [](const HeadResult& r) { return r.case_path == "/healthy_b2_h8_s1024"; }));
  f.context()->setBatch(1);
  f.context()->setHead(6);
  pressKey(*f.window, Qt::Key_F5);
  QVERIFY(waitUntil(
      [&] {
        const auto s = f.window->stepper()->snapshot();
        return s && !f.window->stepper()->busy() && s->searched_to_end;
      },
      180000));
  QCOMPARE(f.window->stepper()->snapshot()->heads_searched, int64_t{1});
  QVERIFY(f.window->stepperPanel()->summary().contains(
      QStringLiteral("ran to the end of this head and of the 1 after it")));
  // Nothing of the stepper's plots outlives a change of case.
  QVERIFY(f.context()->selectCase(0, kOverflowCase));
  for (const QString& name :
       {QStringLiteral("tile S"), QStringLiteral("tile P"), QStringLiteral("dQ acc")}) {
    HeatmapView* v = f.window->stepperPanel()->view(name);
    QVERIFY(v && v->grid() == nullptr && v->stamp().isEmpty());
  }
}

}  // namespace attnscope::test
