// Recorded run vs what-if on the real window (issue 15 item 5): the banner lists what differs
// from the recorded run and "Reset to recorded" returns to it in one click; what-ifs reach the
// dump's sidecar only when the user keeps them, while the view state is always restored. One
// run choice (issue 40 item 1): over a grid of choices the banner, the findings header and
// `attnscope-cli scan --json` with the same options say the same and find the same; what-ifs
// never carry over to another dump.
#include <QCheckBox>
#include <QComboBox>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPushButton>
#include <QtTest>
#include <algorithm>

#include "app/gui/AnalysisController.h"
#include "app/gui/AnnotationController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/FindingsPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/InspectorPanel.h"
#include "app/panels/WhatIfBanner.h"
#include "app/plot/HeatmapView.h"
#include "core/analysis/reference64.h"
#include "core/case_inputs.h"
#include "core/io/hdf5_dump.h"
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
    QVERIFY(!w.context()->choice().mask_fill);
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
  QCOMPARE(w.context()->choice().mask_fill, std::optional<MaskFill>(MaskFill::safe));
  WhatIfBanner* banner = w.window->whatIfBanner();
  QVERIFY(banner->isVisible());
  QVERIFY(banner->keepBox()->isChecked());
  QVERIFY2(banner->text().contains(QStringLiteral("precision fp32 (recorded fp16)")),
           qPrintable(banner->text()));
  // One click back to the recorded run.
  banner->resetButton()->click();
  const RunChoice& s = w.context()->choice();
  QVERIFY(!s.mask_fill && !s.precision && s.modes.empty() && !s.scale && !s.clip_norm &&
          s.backend.empty());
  QVERIFY(w.context()->whatIfs().isEmpty());
  QVERIFY(!banner->isVisible());
  QVERIFY(w.errors.isEmpty());
}

namespace {

// One cell of the grid: how the controls set it, and the same as command-line options.
struct Choice {
  std::function<void(SessionContext*)> set;
  QStringList options;
};

// (kind, severity, tensor) of each finding, sorted: what both front ends must find.
QStringList findingKeys(const std::vector<Finding>& findings) {
  QStringList keys;
  for (const Finding& f : findings) {
    keys << QStringLiteral("%1 %2 %3")
                .arg(QLatin1String(finding_kind_name(f.kind)),
                     QLatin1String(severity_name(f.severity)), QString::fromStdString(f.tensor));
  }
  keys.sort();
  return keys;
}

QStringList findingKeys(const QJsonArray& findings) {
  QStringList keys;
  for (const QJsonValue& v : findings) {
    const QJsonObject f = v.toObject();
    keys << QStringLiteral("%1 %2 %3")
                .arg(f[QStringLiteral("kind")].toString(), f[QStringLiteral("severity")].toString(),
                     f[QStringLiteral("tensor")].toString());
  }
  keys.sort();
  return keys;
}

}  // namespace

void InteractionTest::banner_findings_and_cli_agree_on_every_choice() {
  ShownWindow w;
  QVERIFY(w.window->openTarget({samplePath(), kPadding}));
  const std::vector<Choice> grid = {
      {[](SessionContext*) {}, {}},
      {[](SessionContext* c) { c->setPrecision(Precision::bf16); }, {"--precision", "bf16"}},
      {[](SessionContext* c) { c->setMode(Mode::fused); }, {"--mode", "fused"}},
      {[](SessionContext* c) {
         c->setPrecision(Precision::f32);
         c->setMode(Mode::unfused);
       },
       {"--precision", "fp32", "--mode", "unfused"}},
      {[](SessionContext* c) { c->setMaskFill(MaskFill::safe); }, {"--mask-fill", "safe"}},
      {[](SessionContext* c) { c->setScale(0.0625); }, {"--scale", "0.0625"}},
      {[](SessionContext* c) { c->setClipNorm(1.0); }, {"--clip", "1"}},
      {[](SessionContext* c) {
         c->setClipNorm(1.0);
         c->setClipScope(ClipScope::per_kv_head);
         c->setMode(Mode::unfused);
         c->setMaskFill(MaskFill::neg_1e9);
       },
       {"--clip", "1", "--clip-scope", "kv-head", "--mode", "unfused", "--mask-fill", "1e9"}},
  };
  auto* header = w.window->findings()->findChild<QLabel*>(QStringLiteral("findingsHeader"));
  QVERIFY(header);
  for (const Choice& choice : grid) {
    const QString what = choice.options.isEmpty() ? QStringLiteral("recorded")
                                                  : choice.options.join(QLatin1Char(' '));
    w.context()->resetToRecorded();
    choice.set(w.context());
    QVERIFY2(waitShown([&] { return w.window->analysis()->summaryCurrent(); }, 120000),
             qPrintable(what));
    const auto summary = w.window->analysis()->summary();
    const QString judged = QString::fromStdString(summary->judged_under);
    // The banner shows exactly the choice's what-ifs, in the words `scan` judges under.
    const QStringList whatIfs = w.context()->whatIfs();
    QCOMPARE(w.window->whatIfBanner()->isVisible(), !whatIfs.isEmpty());
    for (const QString& text : whatIfs) {
      QVERIFY2(w.window->whatIfBanner()->text().contains(text), qPrintable(what + ": " + text));
    }
    QCOMPARE(judged.startsWith(QStringLiteral("what-if: ")), !whatIfs.isEmpty());
    QVERIFY2(header->text().contains(QStringLiteral("judged ") + judged),
             qPrintable(what + ": " + header->text()));
    // The CLI with the same options: the same judgement and the same findings.
    const QJsonObject doc =
        cliScanJson(samplePath(), QStringList{QStringLiteral("--case"), kPadding} + choice.options);
    const QJsonObject c = doc[QStringLiteral("cases")].toArray().at(0).toObject();
    QCOMPARE(c[QStringLiteral("config")].toObject()[QStringLiteral("judged_under")].toString(),
             judged);
    QCOMPARE(findingKeys(summary->findings), findingKeys(c[QStringLiteral("findings")].toArray()));
    // The hypothesis test: the banner names the recorded outputs the what-if reproduces, the
    // ones the CLI lists (none, when it lists none).
    const QJsonObject config = c[QStringLiteral("config")].toObject();
    if (config.contains(QStringLiteral("what_if_explains"))) {
      QStringList reproduced;
      for (const QJsonValue& v : config[QStringLiteral("what_if_explains")].toArray()) {
        reproduced << v.toString();
      }
      const QString expected =
          reproduced.isEmpty()
              ? QStringLiteral("The what-if reproduces none of the recorded outputs.")
              : QStringLiteral("The what-if reproduces the recorded %1.")
                    .arg(reproduced.join(QStringLiteral(", ")));
      QVERIFY2(w.window->whatIfBanner()->text().endsWith(expected),
               qPrintable(what + ": " + w.window->whatIfBanner()->text()));
    } else {
      QVERIFY2(!w.window->whatIfBanner()->text().contains(QStringLiteral("reproduces")),
               qPrintable(what));
    }
  }
}

// With recorded outputs a what-if is a hypothesis test, and the banner says its outcome in the
// words of `scan`'s table: fp32 reproduces the recorded o and lse of /recorded_mismatch (its dq,
// dk, dv are wrong whatever the precision), a quarter of the scale reproduces none.
void InteractionTest::banner_says_which_recorded_outputs_a_what_if_reproduces() {
  ShownWindow w;
  QVERIFY(w.window->openTarget({samplePath(), QStringLiteral("/recorded_mismatch")}));
  const auto bannerAfter = [&](const std::function<void(SessionContext*)>& set) {
    w.context()->resetToRecorded();
    set(w.context());
    return waitShown([&] { return w.window->analysis()->summaryCurrent(); }, 120000)
               ? w.window->whatIfBanner()->text()
               : QStringLiteral("(no summary)");
  };
  QString text = bannerAfter([](SessionContext* c) { c->setPrecision(Precision::f32); });
  QVERIFY2(text.endsWith(QStringLiteral("The what-if reproduces the recorded o, lse.")),
           qPrintable(text));
  text = bannerAfter([](SessionContext* c) { c->setScale(0.125); });
  QVERIFY2(text.endsWith(QStringLiteral("The what-if reproduces none of the recorded outputs.")),
           qPrintable(text));
  w.context()->resetToRecorded();  // the recorded run: no banner, no hypothesis
  QVERIFY(waitShown([&] { return w.window->analysis()->summaryCurrent(); }, 120000));
  QVERIFY(!w.window->whatIfBanner()->isVisible());
}

void InteractionTest::what_ifs_do_not_carry_over_to_another_dump() {
  SampleCopy other;
  ShownWindow w;
  QVERIFY(w.window->openTarget({samplePath(), kPadding}));
  w.context()->setMode(Mode::unfused);
  w.context()->setPrecision(Precision::bf16);
  QVERIFY(!w.context()->whatIfs().isEmpty());
  QVERIFY(w.window->openTarget({other.path, kPadding}));
  QVERIFY(w.context()->choice() == RunChoice{});
  QVERIFY(!w.window->whatIfBanner()->isVisible());
}

void InteractionTest::inspector_and_colour_range_belong_to_the_case_shown() {
  ShownWindow w;
  QVERIFY(w.window->openTarget({samplePath(), QStringLiteral("/fp16_score_overflow")}));
  w.context()->setHead(3);
  QVERIFY(w.waitForHead(QStringLiteral("/fp16_score_overflow"), 3));
  // The cursor rests on S[20, 5], finite as recorded; fp16 unfused overflows that row. The
  // inspector reads the new result under the cursor, not the old value.
  HeatmapView* s = w.window->heatmaps()->view(HeadView::s);
  s->hoverCell(20, 5);
  QVERIFY(w.window->inspector()->readoutText().startsWith(QStringLiteral("S [20, 5]\nfinite")));
  w.context()->setPrecision(Precision::f16);
  w.context()->setMode(Mode::unfused);
  QVERIFY(w.waitForHead(QStringLiteral("/fp16_score_overflow"), 3, [](const HeadResult& r) {
    return r.precision == Precision::f16 && r.request.mode() == Mode::unfused;
  }));
  QVERIFY2(w.window->inspector()->readoutText().startsWith(QStringLiteral("S [20, 5]\n+inf")),
           qPrintable(w.window->inspector()->readoutText()));
  // A colour range set by hand fits this case only: the next case starts automatic.
  s->setColorRange(-1, 1);
  QVERIFY(!s->automaticRange());
  QVERIFY(w.context()->selectCase(0, kPadding));
  QVERIFY(w.waitForHead(kPadding, 0));
  QVERIFY(s->automaticRange());
  QVERIFY(!w.context()->colours(HeadView::s).range.has_value());
}

// A dump without a run record (another writer's) whose recorded o is 0 on the rows that see no
// key: the findings infer safe softmax, and the window judges the case the same way once they
// are in: the replay it shows says "(inferred)" and O is 0 on those rows, not NaN.
void InteractionTest::window_judges_a_case_as_its_analysis_inferred() {
  constexpr int64_t kS = 8, kD = 4, kOpen = 6;  // rows and keys from kOpen on are padding
  CaseData c;
  c.info.path = "/padded";
  c.info.config.dtype = "float32";
  c.info.dims = {1, 2, 2, kS, kS, kD, kD};
  const auto values = [](int64_t n, int seed) {
    std::vector<double> x(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * static_cast<double>(i) + seed);
    return x;
  };
  for (const auto& [name, seed] : {std::pair<const char*, int>{"q", 0}, {"k", 1}, {"v", 2}}) {
    c.tensors[name] =
        HostTensor::from_double(DType::f32, {1, 2, kS, kD}, values(2 * kS * kD, seed));
  }
  std::vector<double> mask(static_cast<size_t>(kS * kS));
  for (int64_t i = 0; i < kS; ++i) {
    for (int64_t j = 0; j < kS; ++j) mask[static_cast<size_t>(i * kS + j)] = i < kOpen && j < kOpen;
  }
  c.tensors["mask"] = HostTensor::from_double(DType::boolean, {1, 1, kS, kS}, mask);
  RunChoice safe;
  safe.mask_fill = MaskFill::safe;
  Result<CaseInputs> in = make_case_inputs(c, safe);
  QVERIFY(static_cast<bool>(in));
  c.tensors["o"] =
      HostTensor::from_double(DType::f32, {1, 2, kS, kD}, compute_reference64(*in, false, 1).o);
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("padded.h5"));
  {
    Result<DumpWriter> w = DumpWriter::create(path.toStdString());
    QVERIFY(static_cast<bool>(w));
    QVERIFY(static_cast<bool>(w->write_case("/padded", c)));
    QVERIFY(static_cast<bool>(w->close()));
  }
  ShownWindow w;
  QVERIFY2(w.window->openTarget({path, QStringLiteral("/padded")}),
           qPrintable(w.errors.join(QLatin1Char('\n'))));
  QVERIFY(waitShown([&] { return w.window->analysis()->summaryCurrent(); }, 120000));
  const std::optional<Replay> replay = w.context()->replay();
  QVERIFY(replay && replay->mask_fill == MaskFill::safe);
  QVERIFY2(replay->text.find("(inferred)") != std::string::npos, replay->text.c_str());
  QVERIFY(w.waitForHead(QStringLiteral("/padded"), 0, [](const HeadResult& r) {
    return r.mask_fill == MaskFill::safe && r.outputs && !r.o.empty();
  }));
  const MatrixGrid& o = w.window->context()->result()->o;
  for (int64_t i = kOpen; i < kS; ++i) {
    QCOMPARE(o.readout(i, 0).cls, CellClass::finite);
    QCOMPARE(o.readout(i, 0).value, 0.0f);
  }
  QVERIFY(!w.window->whatIfBanner()->isVisible());  // judged as recorded, not a what-if
  // The controls say what "as recorded" now means.
  auto* fill = w.window->findChild<QComboBox*>(QStringLiteral("maskFillBox"));
  QVERIFY(fill != nullptr);
  QCOMPARE(fill->itemText(0), QStringLiteral("as recorded (safe)"));
}

}  // namespace attnscope::test
