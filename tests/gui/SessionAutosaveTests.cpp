// View state saved without annotations: a never-annotated copy of the sample gets its session in
// the per-user data folder, nothing next to the dump (debounced, before the window closes), and
// comes back as it was left, the dump byte for byte unchanged; with the dump's folder read-only
// the session goes there too and the status bar says so once; every zoomed heatmap tab gets
// its own zoom back.
#include <QCryptographicHash>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QtTest>
#include <algorithm>
#include <utility>
#include <vector>

#include "app/export/SessionFile.h"
#include "app/gui/AnnotationController.h"
#include "app/gui/NavigationController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {
namespace {

const QString kCase = QStringLiteral("/fp16_score_overflow");  // [1, 4, 128, 64]

QJsonObject readJson(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QJsonDocument::fromJson(f.readAll()).object()
                                     : QJsonObject();
}

QByteArray sha1(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly)
             ? QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha1)
             : QByteArray();
}

}  // namespace

void ViewGapTest::view_state_of_unannotated_dump_is_restored() {
  SampleCopy dump;
  const QByteArray before = sha1(dump.path);
  const QString sidecar = SessionFile::fallbackPath(dump.path);
  const MatrixWindow zoom{10, 42, 4, 36};
  {
    ShownWindow w;
    SessionContext* ctx = w.context();
    QVERIFY(w.window->openTarget({dump.path, kCase}));
    ctx->setPrecision(Precision::f16);
    ctx->setMode(Mode::unfused);
    ctx->setHead(3);
    HeatmapPanel* maps = w.window->heatmaps();
    maps->tabs()->setCurrentWidget(maps->view(HeadView::dq));
    QVERIFY(w.waitForHead(kCase, 3));
    maps->view(HeadView::dq)->zoomTo(zoom);
    // Saved while the window is open (debounced), not only on close.
    QVERIFY(waitShown([&] {
      const QJsonObject c = readJson(sidecar)[QStringLiteral("cases")][kCase].toObject();
      return c[QStringLiteral("zooms")][QStringLiteral("dQ")].toArray().size() == 4;
    }));
    w.window->close();
  }
  QCOMPARE(sha1(dump.path), before);
  QVERIFY(!QFileInfo::exists(SessionFile::besidePath(dump.path)));  // nothing next to the dump
  const QJsonObject saved = readJson(sidecar);
  QCOMPARE(saved[QStringLiteral("version")].toInt(), SessionFile::kVersion);
  QCOMPARE(saved[QStringLiteral("cases")][kCase][QStringLiteral("annotations")].toArray().size(),
           0);

  ShownWindow w;
  QVERIFY(w.window->openTarget({dump.path, QString()}));  // no case named: the last one
  QCOMPARE(w.context()->casePath(), kCase);
  QCOMPARE(w.context()->choice().precision, std::optional<Precision>(Precision::f16));
  QCOMPARE(w.context()->choice().mode(), Mode::unfused);
  QCOMPARE(w.context()->head(), int64_t{3});
  QCOMPARE(w.window->heatmaps()->currentView()->name(), QStringLiteral("dQ"));
  QVERIFY(w.waitForHead(kCase, 3));
  QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }));
  QCOMPARE(w.window->heatmaps()->view(HeadView::dq)->visibleWindow(), zoom);
  QCOMPARE(w.context()->result()->precision, Precision::f16);
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

void ViewGapTest::read_only_folder_keeps_session_per_user() {
  SampleCopy dump;
  const QString beside = SessionFile::besidePath(dump.path);
  const QString fallback = SessionFile::fallbackPath(dump.path);
  QVERIFY2(fallback.startsWith(dataHome_.path()), qPrintable(fallback));
  const QFileDevice::Permissions writable = QFile::permissions(dump.dir.path());
  QVERIFY(QFile::setPermissions(dump.dir.path(), QFileDevice::ReadOwner | QFileDevice::ExeOwner |
                                                     QFileDevice::ReadUser | QFileDevice::ExeUser));
  // root writes into a read-only folder anyway: a directory in the sidecar's place makes the
  // write beside the dump fail as the permissions would.
  if (QFileInfo(dump.dir.path()).isWritable()) {
    QFile::setPermissions(dump.dir.path(), writable);
    QVERIFY(QDir().mkdir(beside));
  }
  {
    ShownWindow w;
    QSignalSpy notices(w.window->annotations(), &AnnotationController::notice);
    QVERIFY(w.window->openTarget({dump.path, kCase}));
    w.context()->setHead(2);
    QVERIFY(waitShown([&] { return QFileInfo(fallback).isFile(); }));
    // An annotation is what would go next to the dump: there it cannot, and the status bar
    // says so once.
    QVERIFY(w.window->annotations()->addAnnotation(
        makeAnnotation(AnnotationKind::text, QStringLiteral("S"), QPointF(3, 4), QPointF(3, 4),
                       QStringLiteral("note"))));
    w.window->context()->showView(HeadView::p);
    QVERIFY(waitShown([&] {
      const QJsonObject c = readJson(fallback)[QStringLiteral("cases")][kCase].toObject();
      return c[QStringLiteral("view")].toString() == QStringLiteral("P");
    }));
    w.window->close();
    int said = 0;
    for (const QList<QVariant>& args : notices) {
      said += args.at(0).toString().contains(QStringLiteral("not writable"));
    }
    QCOMPARE(said, 1);
  }
  QVERIFY(!QFileInfo(beside).isFile());
  {
    ShownWindow w;
    QVERIFY(w.window->openTarget({dump.path, QString()}));
    QCOMPARE(w.context()->casePath(), kCase);
    QCOMPARE(w.context()->head(), int64_t{2});
    QCOMPARE(w.window->heatmaps()->currentView()->name(), QStringLiteral("P"));
    QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
  }
  QFile::setPermissions(dump.dir.path(), writable);
}

void ViewGapTest::each_heatmap_tab_restores_its_zoom() {
  SampleCopy dump;
  const MatrixWindow sZoom{16, 48, 20, 52}, dvZoom{0, 32, 8, 24};
  {
    ShownWindow w;
    QVERIFY(w.window->openTarget({dump.path, kCase}));
    QVERIFY(w.waitForHead(kCase, 0));
    HeatmapPanel* maps = w.window->heatmaps();
    // A zoom is kept for the sidecar once its debounce timer reports it: wait for that report,
    // not for a fixed time past the debounce (a busy event loop fires it late).
    std::vector<std::pair<HeadView, MatrixWindow>> reported;
    const QMetaObject::Connection zoomed =
        QObject::connect(w.context(), &SessionContext::zoomed,
                         [&](HeadView v, const std::optional<MatrixWindow>& window) {
                           if (window) reported.emplace_back(v, *window);
                         });
    const auto zoomReported = [&](HeadView v, const MatrixWindow& window) {
      return waitUntil([&] {
        return std::find(reported.begin(), reported.end(), std::make_pair(v, window)) !=
               reported.end();
      });
    };
    maps->view(HeadView::s)->zoomTo(sZoom);
    QVERIFY(zoomReported(HeadView::s, sZoom));
    maps->tabs()->setCurrentWidget(maps->view(HeadView::dv));
    maps->view(HeadView::dv)->zoomTo(dvZoom);
    QVERIFY(zoomReported(HeadView::dv, dvZoom));
    QObject::disconnect(zoomed);
    maps->tabs()->setCurrentWidget(maps->view(HeadView::o));
    w.window->close();
  }
  const QJsonObject c =
      readJson(SessionFile::fallbackPath(dump.path))[QStringLiteral("cases")][kCase].toObject();
  QCOMPARE(c[QStringLiteral("zooms")].toObject().keys(),
           (QStringList{QStringLiteral("S"), QStringLiteral("dV")}));
  QVERIFY(!c.contains(QStringLiteral("zoom")));  // O, the tab shown last, was not zoomed

  ShownWindow w;
  QVERIFY(w.window->openTarget({dump.path, QString()}));
  HeatmapPanel* maps = w.window->heatmaps();
  QCOMPARE(maps->currentView()->name(), QStringLiteral("O"));
  QVERIFY(w.waitForHead(kCase, 0));
  QCOMPARE(maps->currentView()->visibleWindow(), (MatrixWindow{0, 128, 0, 64}));
  maps->tabs()->setCurrentWidget(maps->view(HeadView::s));
  QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }));
  QCOMPARE(maps->view(HeadView::s)->visibleWindow(), sZoom);
  maps->tabs()->setCurrentWidget(maps->view(HeadView::dv));
  QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }));
  QCOMPARE(maps->view(HeadView::dv)->visibleWindow(), dvZoom);
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
