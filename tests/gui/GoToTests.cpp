// Navigation in the real window: Ctrl+G opens the go-to dialog, which zooms the heatmap around
// the cell (recomputing a pooled score matrix at full resolution) and pins the cell's exact
// value in the inspector; out-of-range targets keep the dialog open with a message; Alt+arrows
// move through the steps and layers of the sample's multi-step training dump; --stepper opens
// the window with the backward stepper at a step (the stepper screenshot).
#include <QMenu>
#include <QPointer>
#include <QSpinBox>
#include <QTabWidget>
#include <QTreeWidget>
#include <QtTest>
#include <cmath>

#include "app/gui/AppOptions.h"
#include "app/gui/GoToDialog.h"
#include "app/gui/NavigationController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/StepperController.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/InspectorPanel.h"
#include "app/panels/StepperPanel.h"
#include "app/plot/HeatmapView.h"
#include "core/case_inputs.h"
#include "tests/gui/InteractionTest.h"

namespace attnscope::test {
namespace {

const QString kHealthy = QStringLiteral("/healthy_b2_h8_s1024");
const QString kOverflow = QStringLiteral("/fp16_score_overflow");

// Presses Ctrl+G and returns the dialog it opened.
GoToDialog* openGoTo(MainWindow& window) {
  QTest::keyClick(&window, Qt::Key_G, Qt::ControlModifier);
  GoToDialog* dialog = nullptr;
  waitShown([&] {
    dialog = window.findChild<GoToDialog*>(QStringLiteral("goToDialog"));
    return dialog != nullptr && dialog->isVisible();
  });
  return dialog;
}

// S[b, h, i, j] = scale * q_i . k_j in fp64 from the dump's stored values, and the sum of
// |scale * q_i,d * k_j,d| (the size of the rounding an fp32 dot product may make).
std::pair<double, double> scoreFromDump(const QString& casePath, int64_t b, int64_t h, int64_t i,
                                        int64_t j) {
  Result<DumpReader> reader = DumpReader::open(samplePath().toStdString());
  Result<CaseData> data = reader->load(casePath.toStdString());
  const CaseInputs in = std::move(make_case_inputs(*data, RunChoice{})).value();
  const AttnParams& p = in.params;
  const int64_t kvHead = h / (p.heads / p.kv_heads);
  const double* q = &in.q[static_cast<size_t>(((b * p.heads + h) * p.seqlen_q + i) * p.head_dim)];
  const double* k =
      &in.k[static_cast<size_t>(((b * p.kv_heads + kvHead) * p.seqlen_k + j) * p.head_dim)];
  double dot = 0, size = 0;
  for (int64_t d = 0; d < p.head_dim; ++d) {
    dot += q[d] * k[d];
    size += std::abs(q[d] * k[d]);
  }
  return {p.scale * dot, p.scale * size};
}

}  // namespace

void InteractionTest::go_to_cell_pins_exact_value_on_pooled_scores() {
  ShownWindow w;
  w.context()->setPrecision(Precision::f32);
  QVERIFY(w.window->openTarget({samplePath(), kHealthy}));
  QVERIFY(w.waitForHead(kHealthy, 0, [](const HeadResult& r) { return r.s->pooled; }));
  QPointer<GoToDialog> dialog = openGoTo(*w.window);  // deleted once it closes
  QVERIFY(dialog != nullptr);
  QVERIFY(dialog->target().view == HeadView::s);
  dialog->findChild<QSpinBox*>(QStringLiteral("goToBatch"))->setValue(1);
  dialog->findChild<QSpinBox*>(QStringLiteral("goToHead"))->setValue(5);
  dialog->findChild<QSpinBox*>(QStringLiteral("goToRow"))->setValue(700);
  dialog->findChild<QSpinBox*>(QStringLiteral("goToCol"))->setValue(300);
  QTest::keyClick(dialog, Qt::Key_Return);
  QVERIFY(waitShown([&] { return dialog.isNull(); }));

  // Batch 1, head 5 is computed, the S view zooms to 33 x 33 elements around the cell, and the
  // recompute of that window at full resolution lets the inspector pin the exact element.
  QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }, 120000));
  HeatmapView* s = w.window->heatmaps()->view(HeadView::s);
  QCOMPARE(w.window->heatmaps()->currentView(), s);
  QCOMPARE(s->visibleWindow(), (MatrixWindow{684, 717, 284, 317}));
  const auto r = w.context()->result();
  QCOMPARE(r->request.batch, int64_t{1});
  QCOMPARE(r->request.head, int64_t{5});
  QVERIFY(!r->s->pooled);
  const CellReadout cell = r->s->readout(700, 300);
  QVERIFY(!cell.pooled);
  const auto [expected, size] = scoreFromDump(kHealthy, 1, 5, 700, 300);
  QVERIFY2(std::abs(cell.value - expected) <= 1e-6 * size + 1e-7,
           qPrintable(QStringLiteral("%1 vs %2").arg(cell.value).arg(expected)));
  const QString readout = w.window->inspector()->readoutText();
  QVERIFY2(
      readout.startsWith(QStringLiteral("S [700, 300]\nfinite\n") + describeValue(cell.value).fp32),
      qPrintable(readout));
  QCOMPARE(w.window->inspector()->pinnedCount(), 1);
  QCOMPARE(w.window->inspector()->pinnedList()->topLevelItem(0)->text(0),
           QStringLiteral("S [700, 300]"));
  QCOMPARE(w.window->inspector()->pinnedList()->topLevelItem(0)->text(1), QStringLiteral("b1 h5"));
  QCOMPARE(w.window->inspector()->pinnedList()->topLevelItem(0)->text(2),
           describeValue(cell.value).fp32);
  // The neighbouring element holds another value, so the pin is not off by one.
  QVERIFY(r->s->readout(700, 301).value != cell.value);
  QVERIFY(w.errors.isEmpty());
}

void InteractionTest::go_to_cell_on_feature_tabs_and_range_errors() {
  ShownWindow w;
  w.context()->setPrecision(Precision::f16);
  w.context()->setMode(Mode::unfused);
  QVERIFY(w.window->openTarget({samplePath(), kOverflow}));
  QVERIFY(w.waitForHead(kOverflow, 0));
  NavigationController* nav = w.window->navigation();
  // [Sq x D] and [Sk x D] tabs: the dQ of row 20 (an overflowing row of head 3), column 63.
  QVERIFY(nav->goToCell({HeadView::dq, 0, 3, 20, 63}));
  QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }, 120000));
  const auto r = w.context()->result();
  QCOMPARE(r->request.head, int64_t{3});
  const CellReadout dq = r->dq.readout(20, 63);
  QVERIFY(std::isnan(dq.value));  // fp16 unfused: rows 12-40 of head 3 have NaN gradients
  QCOMPARE(w.window->heatmaps()->currentView()->name(), QStringLiteral("dQ"));
  QVERIFY(w.window->inspector()->readoutText().startsWith(QStringLiteral("dQ [20, 63]\nNaN\n")));
  QCOMPARE(w.window->heatmaps()->currentView()->visibleWindow(), (MatrixWindow{4, 37, 31, 64}));
  QVERIFY(nav->goToCell({HeadView::dk, 0, 3, 127, 0}));
  QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }));
  const CellReadout dk = r->dk.readout(127, 0);
  const QString dkText = w.window->inspector()->readoutText();
  QVERIFY2(dkText.startsWith(
               QStringLiteral("dK [127, 0]\n%1\n%2")
                   .arg(QLatin1String(cell_class_name(dk.cls)), describeValue(dk.value).fp32)),
           qPrintable(dkText));
  QCOMPARE(w.window->inspector()->pinnedCount(), 2);

  // Out of range: the dialog says what is valid and stays open; nothing moves.
  QPointer<GoToDialog> dialog = openGoTo(*w.window);  // deleted once it closes
  QVERIFY(dialog != nullptr);
  QVERIFY(dialog->target().view == HeadView::dk);
  dialog->setTarget({HeadView::s, 0, 3, 128, 0});
  dialog->accept();
  QVERIFY(dialog->isVisible());
  QCOMPARE(dialog->message(),
           QStringLiteral("row 128 is out of range for S (query i x key j): rows 0-127"));
  dialog->setTarget({HeadView::dq, 0, 3, 0, 64});
  dialog->accept();
  QCOMPARE(dialog->message(),
           QStringLiteral("column 64 is out of range for dQ (query i x feature): columns 0-63"));
  dialog->setTarget({HeadView::s, 0, 4, 0, 0});
  dialog->accept();
  QCOMPARE(dialog->message(), QStringLiteral("head 4 is out of range: heads 0-3"));
  QCOMPARE(w.window->heatmaps()->currentView()->name(), QStringLiteral("dK"));
  QCOMPARE(w.window->inspector()->pinnedCount(), 2);
  dialog->setTarget({HeadView::s, 0, 3, 12, 0});
  dialog->accept();
  QVERIFY(waitShown([&] { return dialog.isNull() && !w.window->heatmaps()->regionPending(); }));
  // Row 12 of head 3 is the first to overflow fp16 in the unfused kernel.
  QVERIFY(w.window->inspector()->readoutText().startsWith(QStringLiteral("S [12, 0]\n+inf\n")));
  QVERIFY(w.errors.isEmpty());
}

void InteractionTest::alt_arrows_move_through_steps_and_layers() {
  ShownWindow w;
  QVERIFY(w.window->openTarget({samplePath(), QStringLiteral("/train/step_003/layer_01")}));
  QMenu* menu = w.window->navigation()->menu();
  QStringList shortcuts;
  for (QAction* a : menu->actions()) {
    if (!a->isSeparator()) shortcuts << a->shortcut().toString(QKeySequence::PortableText);
  }
  QCOMPARE(shortcuts, QStringList({QStringLiteral("Ctrl+G"), QStringLiteral("Home"),
                                   QStringLiteral("Alt+Right"), QStringLiteral("Alt+Left"),
                                   QStringLiteral("Alt+Down"), QStringLiteral("Alt+Up"),
                                   QStringLiteral("F8"), QStringLiteral("Shift+F8"),
                                   QStringLiteral("Ctrl+F8"), QStringLiteral("Ctrl+Shift+F8")}));
  const auto press = [&](Qt::Key key) { QTest::keyClick(w.window.get(), key, Qt::AltModifier); };
  SessionContext* ctx = w.context();
  press(Qt::Key_Right);
  QCOMPARE(ctx->casePath(), QStringLiteral("/train/step_004/layer_01"));
  press(Qt::Key_Down);
  QCOMPARE(ctx->casePath(), QStringLiteral("/train/step_004/layer_02"));
  press(Qt::Key_Up);
  press(Qt::Key_Up);
  QCOMPARE(ctx->casePath(), QStringLiteral("/train/step_004/layer_00"));
  // No layer before layer 0: the key does nothing and the action is disabled.
  QVERIFY(!w.window->findChild<QAction*>(QStringLiteral("previousLayerAction"))->isEnabled());
  press(Qt::Key_Up);
  QCOMPARE(ctx->casePath(), QStringLiteral("/train/step_004/layer_00"));
  for (int i = 0; i < 5; ++i) press(Qt::Key_Left);
  QCOMPARE(ctx->casePath(), QStringLiteral("/train/step_000/layer_00"));
  QCOMPARE(w.window->navigation()->neighbourCase(1, 0), QStringLiteral("/train/step_001/layer_00"));
  QCOMPARE(w.window->navigation()->neighbourCase(0, 1), QStringLiteral("/train/step_000/layer_01"));
  QVERIFY(w.window->navigation()->neighbourCase(-1, 0).isEmpty());
  // A case outside the series has no neighbours.
  QVERIFY(w.window->openTarget({samplePath(), kOverflow}));
  for (const char* name :
       {"nextStepAction", "previousStepAction", "nextLayerAction", "previousLayerAction"}) {
    QVERIFY(!w.window->findChild<QAction*>(QLatin1String(name))->isEnabled());
  }
  press(Qt::Key_Right);
  QCOMPARE(ctx->casePath(), kOverflow);
  QVERIFY(w.errors.isEmpty());
}

void InteractionTest::stepper_option_shows_a_backward_tile() {
  const QString target = samplePath() + QStringLiteral("::/padding_mask_fp16");
  QVERIFY(!parseCommandLine({QStringLiteral("attnscope"), QStringLiteral("--stepper"),
                             QStringLiteral("-3"), target})
               .error.isEmpty());
  QCOMPARE(parseCommandLine({QStringLiteral("attnscope"), QStringLiteral("--stepper"),
                             QStringLiteral("nonfinite"), target})
               .stepper,
           std::optional<int64_t>(-1));
  const AppOptions options =
      parseCommandLine({QStringLiteral("attnscope"), QStringLiteral("--batch"), QStringLiteral("1"),
                        QStringLiteral("--stepper"), QStringLiteral("12"), target});
  QVERIFY2(options.error.isEmpty(), qPrintable(options.error));
  QCOMPARE(options.stepper, std::optional<int64_t>(12));
  ShownWindow w;
  QVERIFY(w.window->applyOptions(options));
  StepperController* stepper = w.window->stepper();
  QVERIFY(waitShown([&] {
    return !stepper->busy() && stepper->snapshot() && stepper->snapshot()->position == 12;
  }));
  // Step 12 recomputes P of q tile 1 (rows 64-95, the padded ones), kv tile 0, of batch 1.
  const StepTile& tile = w.context()->stepTile();
  QVERIFY(tile.valid);
  QCOMPARE(tile.qTile, int64_t{1});
  QCOMPARE(tile.kvTile, int64_t{0});
  QCOMPARE(tile.window.row_begin, int64_t{64});
  QCOMPARE(stepper->snapshot()->batch, int64_t{1});
  QVERIFY(w.window->stepperPanel()->isVisible());  // its dock was raised
  // The step turned the padded rows NaN: the panel shows the tile P it computed.
  QVERIFY(stepper->snapshot()->step.new_nonfinite > 0);
  const auto* tabs = w.window->stepperPanel()->findChild<QTabWidget*>();
  QCOMPARE(tabs->tabText(tabs->currentIndex()), QStringLiteral("tile P"));
}

}  // namespace attnscope::test
