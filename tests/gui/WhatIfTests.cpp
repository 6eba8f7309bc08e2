// Recorded run vs what-if on the real window (issue 15 item 5): the banner lists what differs
// from the recorded run and "Reset to recorded" returns to it in one click; what-ifs reach the
// dump's sidecar only when the user keeps them, while the view state is always restored.
#include <QCheckBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPushButton>
#include <QtTest>

#include "app/gui/AnnotationController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/WhatIfBanner.h"
#include "tests/gui/InteractionTest.h"

namespace attnscope::test {
namespace {

const QString kPadding = QStringLiteral("/padding_mask_fp16");

QJsonObject sidecarSettings(const QString& dump) {
  QFile f(dump + QStringLiteral(".attnscope.json"));
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(f.readAll()).object()[QStringLiteral("settings")].toObject();
}

}  // namespace

void InteractionTest::what_ifs_are_kept_only_on_request_and_reset_in_one_click() {
  SampleCopy dump;
  {
    ShownWindow w;
    QVERIFY(w.window->openTarget({dump.path, kPadding}));
    WhatIfBanner* banner = w.window->whatIfBanner();
    QVERIFY(!banner->isVisible());  // the recorded run
    Annotation a;                   // an annotated dump keeps a sidecar
    a.view = QStringLiteral("P");
    a.from = a.to = QPointF(80, 70);
    a.text = QStringLiteral("padded rows -> NaN");
    QVERIFY(w.window->annotations()->addAnnotation(a));
    w.context()->setMaskFill(MaskFill::safe);
    QVERIFY(banner->isVisible());
    QVERIFY2(banner->text().contains(QStringLiteral("mask fill safe (recorded -inf)")),
             qPrintable(banner->text()));
    QVERIFY(!banner->keepBox()->isChecked());
    w.window->close();
  }
  QVERIFY(sidecarSettings(dump.path).isEmpty());
  {
    // Reopened: the user's annotation and case, under the recorded run (NaN rows again).
    ShownWindow w;
    QVERIFY(w.window->openTarget({dump.path, QString()}));
    QCOMPARE(w.context()->casePath(), kPadding);
    QVERIFY(!w.context()->settings().maskFill);
    QVERIFY(!w.window->whatIfBanner()->isVisible());
    QCOMPARE(w.window->context()->annotations()->userAnnotations(QStringLiteral("P")).size(), 1);
    // Kept this time.
    w.context()->setMaskFill(MaskFill::safe);
    w.context()->setPrecision(Precision::f32);
    w.window->whatIfBanner()->keepBox()->click();
    QVERIFY(w.context()->whatIfsKept());
    w.window->close();
  }
  QCOMPARE(sidecarSettings(dump.path)[QStringLiteral("mask_fill")].toString(),
           QStringLiteral("safe"));
  ShownWindow w;
  QVERIFY(w.window->openTarget({dump.path, QString()}));
  QCOMPARE(w.context()->settings().maskFill, std::optional<MaskFill>(MaskFill::safe));
  WhatIfBanner* banner = w.window->whatIfBanner();
  QVERIFY(banner->isVisible());
  QVERIFY(banner->keepBox()->isChecked());
  QVERIFY2(banner->text().contains(QStringLiteral("precision fp32 (recorded fp16)")),
           qPrintable(banner->text()));
  // One click back to the recorded run.
  banner->resetButton()->click();
  const ComputeSettings& s = w.context()->settings();
  QVERIFY(!s.maskFill && !s.precision && !s.mode && !s.scale && !s.clipNorm && s.backend.empty());
  QVERIFY(w.context()->whatIfs().isEmpty());
  QVERIFY(!banner->isVisible());
  QVERIFY(w.errors.isEmpty());
}

}  // namespace attnscope::test
