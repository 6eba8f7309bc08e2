// Each what-if control of the real window changes the views' data as the numerics say:
// precision, mask fill, backend, clip norm and the error-vs-reference heatmaps.
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QSlider>
#include <QtTest>
#include <algorithm>
#include <cmath>

#include "app/gui/AnalysisController.h"
#include "app/gui/HeadComputeController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/ControlsPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "core/kernel_registry.h"
#include "tests/gui/GuiTest.h"

namespace attnscope::test {
namespace {

const QString kExplodingCase = QStringLiteral("/exploding_grad");

double maxAbs(const std::vector<float>& x) {
  double m = 0;
  for (float v : x) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

void choose(QComboBox* box, const QVariant& data) {
  const int index = box->findData(data);
  QVERIFY(index >= 0);
  box->setCurrentIndex(index);
  emit box->activated(index);
}

}  // namespace

void GuiTest::precision_fp16_to_bf16_makes_overflow_finite() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  ControlsPanel* controls = f.window->controls();
  choose(controls->modeBox(), static_cast<int>(Mode::unfused));
  f.context()->setHead(3);
  choose(controls->precisionBox(), static_cast<int>(Precision::f16));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.request.head == 3 && r.precision == Precision::f16 &&
           r.request.mode() == Mode::unfused;
  }));
  const auto fp16 = f.context()->result();
  QVERIFY(fp16->o.counts.nonfinite() > 0);
  QVERIFY(fp16->s->counts.pos_inf + fp16->s->counts.nan > 0);
  choose(controls->precisionBox(), static_cast<int>(Precision::bf16));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.request.head == 3 && r.precision == Precision::bf16;
  }));
  const auto bf16 = f.context()->result();
  QCOMPARE(bf16->o.counts.nonfinite(), int64_t{0});
  QCOMPARE(bf16->s->counts.nonfinite(), int64_t{0});
  QCOMPARE(bf16->dq.counts.nonfinite(), int64_t{0});
  QCOMPARE(f.window->heatmaps()->view(HeadView::o)->overlayCounts().nonfinite(), int64_t{0});
}

void GuiTest::mask_fill_safe_zeroes_fully_masked_rows() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kPaddingCase}));
  f.context()->setBatch(1);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.request.batch == 1 && r.request.run.mask_fill == MaskFill::neg_inf;
  }));
  // fp16 (the case's dtype): the -1e9 padding bias rounds to -inf, rows 70-95 attend nothing.
  const auto before = f.context()->result();
  QCOMPARE(before->precision, Precision::f16);
  QCOMPARE(before->o.counts.nan, int64_t{26 * 64});
  QVERIFY(std::isnan(before->o.raw[70 * 64]) && std::isfinite(before->o.raw[69 * 64]));
  choose(f.window->controls()->maskFillBox(), static_cast<int>(MaskFill::safe));
  QVERIFY(waitForResult(
      *f.window, [](const HeadResult& r) { return r.request.run.mask_fill == MaskFill::safe; }));
  const auto safe = f.context()->result();
  QCOMPARE(safe->o.counts.nonfinite(), int64_t{0});
  QCOMPARE(safe->dq.counts.nonfinite(), int64_t{0});
  for (int64_t e = 70 * 64; e < 96 * 64; ++e) QCOMPARE(safe->o.raw[static_cast<size_t>(e)], 0.0f);
  // Rows with real tokens are unchanged by the fill policy.
  for (int64_t e = 0; e < 70 * 64; ++e) {
    QCOMPARE(safe->o.raw[static_cast<size_t>(e)], before->o.raw[static_cast<size_t>(e)]);
  }
  QVERIFY(f.window->heatmaps()->view(HeadView::o)->stamp().contains("mask safe"));
}

void GuiTest::backend_picker_runs_registry_variant() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  f.context()->setHead(3);
  QComboBox* backend = f.window->controls()->backendBox();
  QCOMPARE(backend->count(), static_cast<int>(kernel_variants().size()) + 1);
  // The fp64 reference keeps head 3 finite and agrees with itself: O err is float rounding.
  choose(backend, QStringLiteral("reference"));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.request.head == 3 && r.backend == "reference";
  }));
  const auto ref = f.context()->result();
  QCOMPARE(ref->o.counts.nonfinite(), int64_t{0});
  QVERIFY(!ref->o_err.empty());
  QVERIFY(maxAbs(ref->o_err.raw) <= 1e-6 * maxAbs(ref->o.raw));
  QVERIFY(ref->o_err.counts.nonfinite() == 0);
  QVERIFY(f.window->heatmaps()->view(HeadView::o)->stamp().contains("backend reference"));
  // The unfused CPU emulation in fp16 overflows in head 3; its error tab shows it.
  choose(backend, QStringLiteral("cpu-unfused"));
  choose(f.window->controls()->precisionBox(), static_cast<int>(Precision::f16));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.backend == "cpu-unfused" && r.precision == Precision::f16;
  }));
  QVERIFY(f.context()->result()->o.counts.nonfinite() > 0);
  QVERIFY(f.context()->result()->o_err.counts.nonfinite() > 0);
  // Back to the own kernel in fused mode: finite, with an fp16-sized error.
  choose(backend, QString());
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.backend == "cpu" && r.precision == Precision::f16 && r.request.mode() == Mode::fused;
  }));
  const auto fused = f.context()->result();
  QCOMPARE(fused->o.counts.nonfinite(), int64_t{0});
  const double err = maxAbs(fused->o_err.raw);
  QVERIFY(err > 1e-6 * maxAbs(fused->o.raw));
  QVERIFY(err < 1e-2 * maxAbs(fused->o.raw));
  QVERIFY(f.errors.isEmpty());
}

void GuiTest::clip_norm_scales_gradients_and_reports() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kExplodingCase}));
  f.context()->setHead(5);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.request.head == 5 && !r.request.run.clip_norm;
  }));
  const auto before = f.context()->result();
  ControlsPanel* controls = f.window->controls();
  controls->clipEdit()->setText(QStringLiteral("1"));
  controls->clipBox()->setChecked(true);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.clip.has_value(); }));
  const auto after = f.context()->result();
  const ClipResult& c = *after->clip;
  // clip_grad_norm_: total = ||(||dQ||, ||dK||, ||dV||)||, coef = 1 / (total + 1e-6) < 1.
  double sum = 0;
  for (double n : c.norms_before) sum += n * n;
  QVERIFY(std::fabs(c.total_norm - std::sqrt(sum)) <= 1e-9 * c.total_norm);
  QVERIFY(c.total_norm > 1e3);  // ||dO|| ~ 1e6 in head 5
  QCOMPARE(c.coef, 1.0 / (c.total_norm + 1e-6));
  // Every dQ row shrinks by coef (bf16 rounding of the product aside).
  for (size_t i = 0; i < after->dq_norm.size(); i += 17) {
    const double want = before->dq_norm[i] * c.coef;
    QVERIFY(std::fabs(after->dq_norm[i] - want) <= 1e-2 * want + 1e-30);
  }
  const QString report = controls->clipReport()->text();
  QVERIFY2(report.contains(QStringLiteral("coef")) && report.contains(QStringLiteral("dQ")),
           qPrintable(report));
  // A NaN total norm spreads to every clipped gradient (padded rows of batch 1).
  QVERIFY(f.window->openTarget({samplePath(), kPaddingCase}));
  f.context()->setBatch(1);
  QVERIFY(waitForResult(
      *f.window, [](const HeadResult& r) { return r.request.batch == 1 && r.clip.has_value(); }));
  const auto spread = f.context()->result();
  QVERIFY(spread->clip->nonfinite_total);
  QCOMPARE(spread->dq.counts.nan, spread->seqlen_q * spread->head_dim);
  QVERIFY(controls->clipReport()->text().contains(QStringLiteral("NaN")));
}

void GuiTest::scale_slider_says_when_no_scale_can_help() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  f.context()->setHead(3);
  f.context()->setPrecision(Precision::f16);
  f.context()->setMode(Mode::unfused);
  QLabel* note = f.window->controls()->scaleNote();
  // Unfused fp16 rounds Q K^T before scaling it: no scale brings S back.
  QVERIFY(waitUntil([&] { return f.window->analysis()->summaryCurrent() && !note->isHidden(); }));
  QVERIFY2(note->text().contains(QStringLiteral("No scale helps")), qPrintable(note->text()));
  QVERIFY2(note->text().contains(QStringLiteral("65504")), qPrintable(note->text()));
  // The finding says the same, and why S is drawn inf although scaled it would fit.
  const auto summary = f.window->analysis()->summary();
  const auto overflow = std::find_if(
      summary->findings.begin(), summary->findings.end(),
      [](const Finding& x) { return x.kind == FindingKind::score_overflow && x.head == 3; });
  QVERIFY(overflow != summary->findings.end());
  QVERIFY2(overflow->message.find("overflows before the scale") != std::string::npos,
           overflow->message.c_str());
  // The fused kernel keeps the scores in fp32: the scale is in the user's hands again.
  f.context()->setMode(Mode::fused);
  QVERIFY(waitUntil([&] { return f.window->analysis()->summaryCurrent(); }));
  QVERIFY(note->isHidden());
}

void GuiTest::one_head_compute_per_slider_tick() {
  WindowFixture f;
  f.window->show();
  QVERIFY(QTest::qWaitForWindowExposed(f.window.get()));
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  HeadComputeController* compute = f.window->headCompute();
  // A tick of the scale slider (the keyboard's Right, as a user steps it): one request.
  QSlider* slider = f.window->controls()->scaleSlider();
  slider->setFocus();
  int before = compute->requests();
  QTest::keyClick(slider, Qt::Key_Right);
  QTest::qWait(50);
  QCOMPARE(compute->requests(), before + 1);
  QVERIFY(waitForResult(*f.window, [&](const HeadResult& r) {
    return r.scale == f.context()->effectiveScale() && r.gradients;
  }));
  // A case, batch and head chosen in one go (as going to a finding does): one request too.
  before = compute->requests();
  QVERIFY(f.context()->selectCase(0, kPaddingCase));
  f.context()->setBatch(1);
  f.context()->setHead(2);
  QTest::qWait(50);
  QCOMPARE(compute->requests(), before + 1);
}

}  // namespace attnscope::test
