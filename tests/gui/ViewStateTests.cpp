// The view state in the sidecar session, in the real window on a copy of the sample: kept
// what-if settings, case, head, tab, colour state and zoom come back exactly after closing and
// reopening the dump (without naming the case), and a version 1 sidecar (before zoom and colour
// state existed) still restores what it holds and is upgraded on the next save; options given
// on the command line win over the saved state.
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <optional>

#include "app/export/SessionFile.h"
#include "app/gui/AnnotationController.h"
#include "app/gui/AppOptions.h"
#include "app/gui/NavigationController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/InteractionTest.h"

namespace attnscope::test {
namespace {

const QString kCase = QStringLiteral("/fp16_score_overflow");

QJsonObject readSidecar(const QString& dump) {
  QFile f(dump + QStringLiteral(".attnscope.json"));
  return f.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(f.readAll()).object()
                                     : QJsonObject();
}

}  // namespace

void InteractionTest::view_state_is_restored_on_reopen() {
  SampleCopy dump;
  const MatrixWindow zoom{10, 42, 8, 40};
  {
    ShownWindow w;
    SessionContext* ctx = w.context();
    QVERIFY(w.window->openTarget({dump.path, kCase}));
    Annotation a;  // an annotated dump keeps a sidecar
    a.view = QStringLiteral("S");
    a.from = a.to = QPointF(3, 4);
    a.text = QStringLiteral("keep");
    QVERIFY(w.window->annotations()->addAnnotation(a));
    ctx->setPrecision(Precision::bf16);
    ctx->setMode(Mode::unfused);
    ctx->setMaskFill(MaskFill::safe);
    ctx->setScale(0.0625);
    ctx->setClipNorm(1.5);
    ctx->setBackend("reference");
    ctx->setWhatIfsKept(true);  // the user keeps the what-ifs with the dump
    ctx->setBatch(0);
    ctx->setHead(2);
    HeatmapPanel* maps = w.window->heatmaps();
    maps->view(HeadView::s)->setColorRange(-5, 5);
    maps->tabs()->setCurrentWidget(maps->view(HeadView::ds));
    HeatmapView* ds = maps->view(HeadView::ds);
    ds->setColormap(ColormapKind::sequential);
    ds->setScaleKind(ScaleKind::symlog);
    QVERIFY(w.waitForHead(kCase, 2, [](const HeadResult& r) { return r.backend == "reference"; }));
    // The zoom is reported (and so kept for the sidecar) once its debounce timer fires: wait
    // for that report, not for a fixed time past the debounce (a busy event loop fires it late).
    bool reported = false;
    const QMetaObject::Connection zoomed = QObject::connect(
        ctx, &SessionContext::zoomed, [&](HeadView v, const std::optional<MatrixWindow>& window) {
          reported = reported || (v == HeadView::ds && window == zoom);
        });
    ds->zoomTo(zoom);
    QVERIFY(waitUntil([&] { return reported; }));
    QObject::disconnect(zoomed);
    QCOMPARE(ds->visibleWindow(), zoom);
    w.window->close();
  }
  const QJsonObject saved = readSidecar(dump.path);
  QCOMPARE(saved[QStringLiteral("version")].toInt(), SessionFile::kVersion);
  QCOMPARE(saved[QStringLiteral("last_case")].toString(), kCase);

  ShownWindow w;
  SessionContext* ctx = w.context();
  // No case named: the last one shown, not the file's first (/train/step_000/layer_00).
  QVERIFY(w.window->openTarget({dump.path, QString()}));
  QCOMPARE(ctx->casePath(), kCase);
  const RunChoice& s = ctx->choice();
  QCOMPARE(s.precision, std::optional<Precision>(Precision::bf16));
  QCOMPARE(s.mode(), Mode::unfused);
  QCOMPARE(s.mask_fill, MaskFill::safe);
  QCOMPARE(s.scale, std::optional<double>(0.0625));
  QCOMPARE(s.clip_norm, std::optional<double>(1.5));
  QCOMPARE(s.backend, std::string("reference"));
  QVERIFY(ctx->whatIfsKept());
  QCOMPARE(ctx->head(), int64_t{2});
  HeatmapPanel* maps = w.window->heatmaps();
  QCOMPARE(maps->currentView()->name(), QStringLiteral("dS"));
  const HeatmapView* sView = maps->view(HeadView::s);
  QVERIFY(!sView->automaticRange());
  QCOMPARE(sView->colorScale().lo, -5.0);
  QCOMPARE(sView->colorScale().hi, 5.0);
  const HeatmapView* ds = maps->view(HeadView::ds);
  QCOMPARE(ds->colorScale().map, ColormapKind::sequential);
  QCOMPARE(ds->colorScale().scale, ScaleKind::symlog);
  QVERIFY(ds->automaticRange());
  QCOMPARE(maps->view(HeadView::p)->colorScale().scale, ScaleKind::linear);
  // The zoom comes back once the head's result is shown.
  QVERIFY(w.waitForHead(kCase, 2, [](const HeadResult& r) { return r.backend == "reference"; }));
  QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }));
  QCOMPARE(ds->visibleWindow(), zoom);
  QCOMPARE(w.context()->result()->precision, Precision::bf16);
  QVERIFY(w.errors.isEmpty());
}

void InteractionTest::version_1_sidecar_still_restores() {
  SampleCopy dump;
  const QString sidecar = dump.path + QStringLiteral(".attnscope.json");
  {
    QFile f(sidecar);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(R"({"format": "attnscope-session", "version": 1, "last_case": "/fp16_score_overflow",
      "settings": {"precision": "fp16", "mode": "unfused", "mask_fill": "-inf"},
      "cases": {"/fp16_score_overflow": {"batch": 0, "head": 3, "view": "P", "zoom": "bad",
        "annotations": [{"kind": "text", "view": "S", "batch": 0, "head": 3,
                         "from": [5, 6], "to": [5, 6], "text": "old note"}]}}})");
  }
  ShownWindow w;
  QVERIFY(w.window->openTarget({dump.path, QString()}));
  QCOMPARE(w.context()->casePath(), kCase);
  QCOMPARE(w.context()->choice().precision, std::optional<Precision>(Precision::f16));
  QCOMPARE(w.context()->choice().mode(), Mode::unfused);
  QVERIFY(!w.context()->choice().scale);
  QVERIFY(!w.context()->choice().clip_norm);
  QCOMPARE(w.context()->head(), int64_t{3});
  QCOMPARE(w.window->heatmaps()->currentView()->name(), QStringLiteral("P"));
  const SessionFile* session = w.window->annotations()->session();
  QCOMPARE(session->readVersion(), 1);
  // The unreadable zoom is reported and ignored: the whole matrix is shown.
  QCOMPARE(session->notes().size(), 1);
  QVERIFY2(session->notes()[0].contains(QStringLiteral("zoom")), qPrintable(session->notes()[0]));
  QVERIFY(w.waitForHead(kCase, 3));
  QCOMPARE(w.window->heatmaps()->currentView()->visibleWindow(), (MatrixWindow{0, 128, 0, 128}));
  QCOMPARE(w.window->context()->annotations()->userAnnotations(QStringLiteral("S")).size(), 1);
  // The next save writes version 2 without a backup (an older version is understood fully).
  w.window->context()->showView(HeadView::o);
  const QJsonObject saved = readSidecar(dump.path);
  QCOMPARE(saved[QStringLiteral("version")].toInt(), 2);
  QCOMPARE(saved[QStringLiteral("cases")][kCase][QStringLiteral("view")].toString(),
           QStringLiteral("O"));
  QVERIFY(!QFile::exists(sidecar + QStringLiteral(".v1.bak")));
  QVERIFY(w.errors.isEmpty());
}

void InteractionTest::command_line_wins_over_the_saved_view() {
  SampleCopy dump;
  const QString padded = QStringLiteral("/padding_mask_fp16");
  {  // The last session showed O of batch 1, head 2, zoomed.
    QFile sidecar(SessionFile::besidePath(dump.path));
    QVERIFY(sidecar.open(QIODevice::WriteOnly));
    sidecar.write(R"({"format": "attnscope-session", "version": 2, "cases": {
      "/padding_mask_fp16": {"batch": 1, "head": 2, "view": "O",
        "zooms": {"O": [0, 40, 0, 64]}, "annotations": []}}})");
  }
  ShownWindow w;
  const AppOptions options =
      parseCommandLine({QStringLiteral("attnscope"), "--matrix", "P", "--head", "1",
                        dump.path + QStringLiteral("::") + padded});
  QVERIFY(options.error.isEmpty());
  QVERIFY(w.window->applyOptions(options));
  QVERIFY(w.waitForHead(padded, 1));
  QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }));
  QCOMPARE(w.window->heatmaps()->currentView()->name(), QStringLiteral("P"));
  QCOMPARE(w.context()->head(), int64_t{1});
  QCOMPARE(w.context()->batch(), int64_t{1});  // what the command line left open: restored
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
