// The backward stepper in the real window: F10 / Shift+F10 move one step and outline the
// step's tile on every heatmap, F5 lands on the tile an independently driven BackwardStepper
// finds first non-finite, and the stepper panel shows that tile's intermediates.
#include <QtTest>

#include "app/gui/SessionContext.h"
#include "app/gui/StepperController.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/StepperPanel.h"
#include "app/plot/HeatmapView.h"
#include "kernels/cpu/backward_stepper.h"
#include "tests/gui/GuiTest.h"

namespace attnscope::test {
namespace {

const QString kPaddingCase = QStringLiteral("/padding_mask_fp16");

// The reference walk: a BackwardStepper over the whole case at (b, h), as the CLI drives it.
struct ReferenceWalk {
  CaseInputs inputs;
  std::vector<float> q, k, v, dout;
  CpuAttnResult fwd;
  std::unique_ptr<BackwardStepper> stepper;

  ReferenceWalk(const QString& casePath, int64_t b, int64_t h) {
    Result<DumpReader> reader = DumpReader::open(samplePath().toStdString());
    Result<CaseData> data = reader->load(casePath.toStdString());
    inputs = std::move(make_case_inputs(*data, RunSettings{})).value();
    q = inputs.q_f32();
    k = inputs.k_f32();
    v = inputs.v_f32();
    dout = inputs.dout_f32();
    const CpuAttnInputs in{q.data(), k.data(), v.data(), dout.empty() ? nullptr : dout.data()};
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

ViewWindow tileOf(const StepInfo& s) {
  return {s.row_begin, s.row_end, s.col_begin, s.col_end};
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
  QCOMPARE(*maps->view(QStringLiteral("S"))->highlight(), tileOf(expected));
  QCOMPARE(*maps->view(QStringLiteral("dS"))->highlight(), tileOf(expected));
  const ViewWindow rows{expected.row_begin, expected.row_end, 0, 64};
  QCOMPARE(*maps->view(QStringLiteral("dQ"))->highlight(), rows);
  const ViewWindow keys{expected.col_begin, expected.col_end, 0, 64};
  QCOMPARE(*maps->view(QStringLiteral("dK"))->highlight(), keys);
  QVERIFY(f.window->stepperPanel()->summary().contains(QStringLiteral("score_tile")));
  // The tile's scores are shown at their absolute indices.
  const MatrixGrid* tileS = f.window->stepperPanel()->view(QStringLiteral("tile S"))->grid();
  QVERIFY(tileS != nullptr);
  QCOMPARE(tileS->row_edges.front(), expected.row_begin);
  QCOMPARE(tileS->rows, expected.row_end - expected.row_begin);

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
  QVERIFY(snap.step.row_end > 70);  // the tile holds padded query rows
  QCOMPARE(*f.window->heatmaps()->view(QStringLiteral("P"))->highlight(), tileOf(expected.step));
  QCOMPARE(f.context()->stepTile().qTile, expected.step.q_tile);
  QVERIFY(f.window->stepperPanel()->summary().contains(QStringLiteral("stopped")));

  // A settings change keeps the position; restart clears the outline.
  f.context()->setMaskFill(MaskFill::safe);
  QTRY_VERIFY_WITH_TIMEOUT(!stepper->busy() && stepper->snapshot() &&
                               stepper->snapshot()->position == second &&
                               !stepper->snapshot()->found,
                           60000);
  stepper->restart();
  QVERIFY(!f.window->heatmaps()->view(QStringLiteral("P"))->highlight());
}

}  // namespace attnscope::test
