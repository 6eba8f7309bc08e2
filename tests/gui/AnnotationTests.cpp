// Annotations: automatic markers of a grid, the JSON form, placing a box with the mouse, and
// the sidecar session file (round trip across windows, a corrupt file, a newer version); the
// dump itself is never modified.
#include <QCryptographicHash>
#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSignalSpy>
#include <QtTest>

#include "app/gui/AnnotationController.h"
#include "app/gui/ComputeWorker.h"
#include "app/gui/SessionContext.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/ExportTest.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {
namespace {

const QString kCase = QStringLiteral("/fp16_score_overflow");

QByteArray readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void writeAll(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  QCOMPARE(f.write(bytes), bytes.size());
}

QJsonObject readJson(const QString& path) {
  return QJsonDocument::fromJson(readAll(path)).object();
}

// Waits for the result of the restored / chosen head of kCase in fp16 unfused.
bool waitForHead(MainWindow& window, int head) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < 120000) {
    QTest::qWait(20);
    const auto r = window.context()->result();
    if (r && !window.worker()->busy() && r->request.head == head &&
        QString::fromStdString(r->case_path) == kCase) {
      QTest::qWait(50);
      return true;
    }
  }
  return false;
}

}  // namespace

void ExportTest::automatic_markers_find_first_nonfinite_and_max() {
  // 3 x 4 full-resolution grid: masked (0, 1), NaN (1, 2), -inf (2, 0), largest |x| = 7.5 at (2,
  // 3).
  MatrixGrid g;
  g.name = "S";
  g.rows = g.total_rows = 3;
  g.cols = g.total_cols = 4;
  g.row_edges = {0, 1, 2, 3};
  g.col_edges = {0, 1, 2, 3, 4};
  g.value = {1, NAN, 2, 3, 0.5f, -1, NAN, 4, NAN, 6, 7, -7.5f};
  g.cls.assign(12, CellClass::finite);
  g.cls[1] = CellClass::masked;
  g.cls[6] = CellClass::nan;
  g.cls[8] = CellClass::neg_inf;
  const QList<Annotation> m = automaticMarkers(g, QStringLiteral("S"), 1, 2);
  QCOMPARE(m.size(), 2);
  QCOMPARE(m[0].text, QStringLiteral("first NaN at (1, 2)"));
  QCOMPARE(m[0].to, QPointF(2, 1));  // x = column, y = row
  QCOMPARE(m[1].text, QStringLiteral("max |S| = 7.5 at (2, 3)"));
  QCOMPARE(m[1].to, QPointF(3, 2));
  for (const Annotation& a : m) {
    QVERIFY(a.automatic);
    QCOMPARE(a.kind, AnnotationKind::arrow);
    QCOMPARE(a.batch, 1);
    QCOMPARE(a.head, 2);
    QVERIFY(a.from.x() >= 0 && a.from.x() < 4 && a.from.y() >= 0 && a.from.y() < 3);
  }
  // A grid with nothing but masked and finite cells gets only the max marker.
  g.cls[6] = g.cls[8] = CellClass::masked;
  QCOMPARE(automaticMarkers(g, QStringLiteral("S"), 0, 0).size(), 1);
  // A tie for the largest |value| marks its first cell; a masked cell's value never counts.
  g.value[0] = 7.5f;
  g.value[6] = 100.f;
  const QList<Annotation> tie = automaticMarkers(g, QStringLiteral("S"), 0, 0);
  QCOMPARE(tie.size(), 1);
  QCOMPARE(tie[0].text, QStringLiteral("max |S| = 7.5 at (0, 0)"));
  // A zoomed grid (rows 1000-1009, keys 3000-3019 of 4096 x 4096) with a NaN at its corner: the
  // label stays inside the window the grid covers, so the export of the zoom keeps it whole.
  MatrixGrid z;
  z.name = "S";
  z.rows = 10;
  z.cols = 20;
  z.total_rows = z.total_cols = 4096;
  for (int64_t r = 0; r <= z.rows; ++r) z.row_edges.push_back(1000 + r);
  for (int64_t c = 0; c <= z.cols; ++c) z.col_edges.push_back(3000 + c);
  z.value.assign(200, 1.f);
  z.cls.assign(200, CellClass::finite);
  z.value[0] = NAN;
  z.cls[0] = CellClass::nan;
  const QList<Annotation> zoomed = automaticMarkers(z, QStringLiteral("S"), 0, 0);
  QVERIFY(!zoomed.isEmpty());
  for (const Annotation& a : zoomed) {
    QVERIFY2(a.from.x() >= 3000 && a.from.x() <= 3019 && a.from.y() >= 1000 && a.from.y() <= 1009 &&
                 a.from != a.to,
             qPrintable(a.text));
  }
}

void ExportTest::annotation_json_round_trip_rejects_garbage() {
  const Annotation box = makeAnnotation(AnnotationKind::box, QStringLiteral("dS"), QPointF(0.5, 12),
                                        QPointF(63.25, 40), QStringLiteral("overflow band"));
  const std::optional<Annotation> back = Annotation::fromJson(box.toJson());
  QVERIFY(back.has_value());
  QVERIFY(*back == box);
  QJsonObject bad = box.toJson();
  bad[QStringLiteral("kind")] = QStringLiteral("ellipse");
  QVERIFY(!Annotation::fromJson(bad));
  bad = box.toJson();
  bad[QStringLiteral("from")] = QJsonArray{QStringLiteral("a"), 1};
  QVERIFY(!Annotation::fromJson(bad));
  bad = box.toJson();
  bad.remove(QStringLiteral("view"));
  QVERIFY(!Annotation::fromJson(bad));
  bad = box.toJson();
  bad[QStringLiteral("head")] = -1;
  QVERIFY(!Annotation::fromJson(bad));
  QVERIFY(!Annotation::fromJson(QJsonObject{}));
}

void ExportTest::box_tool_places_annotation_with_the_mouse() {
  SampleCopy dump;
  ExportWindow w;
  QVERIFY(w.open(dump.path, kCase, 3, Mode::unfused));
  AnnotationController* notes = w.window->annotations();
  const AnnotationBoard* board = w.window->context()->annotations();
  HeatmapView* s = w.window->heatmaps()->view(HeadView::s);
  auto* plot = s->findChild<QWidget*>(QStringLiteral("heatmapPlot_S"));
  AnnotationLayer* layer = AnnotationLayer::of(s);
  QCOMPARE(layer->itemCount(), 4);  // two automatic markers: arrow + label each
  notes->setTool(AnnotationTool::box);
  notes->setLabel(QStringLiteral("overflow band"));
  const QPoint from = layer->toPixel(QPointF(0, 12)), to = layer->toPixel(QPointF(63, 40));
  QTest::mousePress(plot, Qt::LeftButton, {}, from);
  QTest::mouseMove(plot, (from + to) / 2);
  QTest::mouseMove(plot, to);
  QTest::mouseRelease(plot, Qt::LeftButton, {}, to);
  // A click without a drag places no box.
  QTest::mouseClick(plot, Qt::LeftButton, {}, to);
  const QList<Annotation> placed = board->userAnnotations(QStringLiteral("S"));
  QCOMPARE(placed.size(), 1);
  const Annotation& box = placed.front();
  QCOMPARE(box.kind, AnnotationKind::box);
  QCOMPARE(box.text, QStringLiteral("overflow band"));
  QCOMPARE(box.head, 3);
  QVERIFY(std::abs(box.from.x() - 0) < 0.6 && std::abs(box.from.y() - 12) < 0.6);
  QVERIFY(std::abs(box.to.x() - 63) < 0.6 && std::abs(box.to.y() - 40) < 0.6);
  QCOMPARE(layer->itemCount(), 6);  // + the rectangle and its label
  // The sidecar holds it, next to the dump.
  const QJsonObject saved = readJson(dump.path + QStringLiteral(".attnscope.json"));
  QCOMPARE(saved[QStringLiteral("version")].toInt(), SessionFile::kVersion);
  const QJsonArray list =
      saved[QStringLiteral("cases")][kCase][QStringLiteral("annotations")].toArray();
  QCOMPARE(list.size(), 1);
  QCOMPARE(list[0][QStringLiteral("text")].toString(), QStringLiteral("overflow band"));
  // The text tool places the label where one clicks.
  notes->setTool(AnnotationTool::text);
  notes->setLabel(QStringLiteral("look here"));
  QTest::mouseClick(plot, Qt::LeftButton, {}, layer->toPixel(QPointF(10, 5)));
  QCOMPARE(board->userAnnotations(QStringLiteral("S")).size(), 2);
  QCOMPARE(board->userAnnotations(QStringLiteral("S")).last().kind, AnnotationKind::text);
  QVERIFY(notes->removeLast());
  QCOMPARE(board->userAnnotations(QStringLiteral("S")).size(), 1);
}

void ExportTest::annotations_survive_closing_and_reopening() {
  SampleCopy dump;
  const QByteArray hashBefore =
      QCryptographicHash::hash(readAll(dump.path), QCryptographicHash::Sha256);
  const QDateTime mtimeBefore = QFileInfo(dump.path).lastModified();
  const Annotation arrow =
      makeAnnotation(AnnotationKind::arrow, QStringLiteral("S"), QPointF(50, 5), QPointF(20, 12),
                     QStringLiteral("+inf starts here"));
  const Annotation text = makeAnnotation(AnnotationKind::text, QStringLiteral("dS"), QPointF(8, 30),
                                         QPointF(8, 30), QStringLiteral("NaN gradient"));
  {
    ExportWindow w;
    QVERIFY(w.open(dump.path, kCase, 3, Mode::unfused));
    QVERIFY(w.window->annotations()->addAnnotation(arrow));
    QVERIFY(w.window->annotations()->addAnnotation(text));
    w.window->context()->showView(HeadView::p);
    w.window->close();
  }
  {
    ExportWindow w;
    w.window->context()->setPrecision(Precision::f16);
    w.window->context()->setMode(Mode::unfused);
    QVERIFY(w.window->openTarget({dump.path, kCase}));
    // Head 3 and the P tab come back from the sidecar, and so do the annotations.
    QVERIFY(waitForHead(*w.window, 3));
    QCOMPARE(w.window->heatmaps()->tabs()->tabText(w.window->heatmaps()->tabs()->currentIndex()),
             QStringLiteral("P"));
    const AnnotationBoard* board = w.window->context()->annotations();
    QCOMPARE(board->userAnnotations(QStringLiteral("S")), QList<Annotation>{arrow});
    QCOMPARE(board->userAnnotations(QStringLiteral("dS")), QList<Annotation>{text});
    QCOMPARE(AnnotationLayer::of(w.window->heatmaps()->view(HeadView::ds))->annotations(),
             board->drawn(QStringLiteral("dS")));
    QVERIFY(board->drawn(QStringLiteral("dS")).contains(text));
    QVERIFY(w.errors.isEmpty());
  }
  // The dump was never written: same bytes, same modification time.
  QCOMPARE(QCryptographicHash::hash(readAll(dump.path), QCryptographicHash::Sha256), hashBefore);
  QCOMPARE(QFileInfo(dump.path).lastModified(), mtimeBefore);
}

void ExportTest::two_windows_on_one_dump_keep_both_annotations() {
  SampleCopy dump;
  const Annotation first = makeAnnotation(AnnotationKind::arrow, QStringLiteral("S"),
                                          QPointF(50, 5), QPointF(20, 12), QStringLiteral("A"));
  const Annotation second = makeAnnotation(AnnotationKind::text, QStringLiteral("S"),
                                           QPointF(8, 30), QPointF(8, 30), QStringLiteral("B"));
  const Annotation third = makeAnnotation(AnnotationKind::box, QStringLiteral("S"), QPointF(1, 1),
                                          QPointF(4, 4), QStringLiteral("A2"));
  {
    // Two windows (two attnscope instances) on the same dump, each with its session read
    // before the other saved.
    ExportWindow a, b;
    QVERIFY(a.open(dump.path, kCase, 3, Mode::unfused));
    QVERIFY(b.open(dump.path, kCase, 3, Mode::unfused));
    QSignalSpy bNotices(b.window->annotations(), &AnnotationController::notice);
    QVERIFY(a.window->annotations()->addAnnotation(first));
    QVERIFY(b.window->annotations()->addAnnotation(second));  // merges A's first
    QCOMPARE(bNotices.size(), 1);
    QVERIFY2(bNotices[0][0].toString().contains(
                 QStringLiteral("saved by another attnscope window on this dump: its 1 new")),
             qPrintable(bNotices[0][0].toString()));
    QCOMPARE(b.window->context()->annotations()->userAnnotations(QStringLiteral("S")),
             (QList<Annotation>{second, first}));
    // A removes its annotation (its save merges B's) and adds another: B's stays, A's
    // removal holds.
    QVERIFY(a.window->annotations()->removeLast());
    QVERIFY(a.window->annotations()->addAnnotation(third));
    QCOMPARE(a.window->context()->annotations()->userAnnotations(QStringLiteral("S")),
             (QList<Annotation>{second, third}));
    QVERIFY(a.errors.isEmpty() && b.errors.isEmpty());
  }
  const SessionFile saved = SessionFile::load(dump.path, false);
  QVERIFY(saved.notes().isEmpty());
  QCOMPARE(saved.cases.value(kCase).annotations, (QList<Annotation>{second, third}));
}

void ExportTest::corrupt_sidecar_is_kept_aside() {
  SampleCopy dump;
  const QString sidecar = dump.path + QStringLiteral(".attnscope.json");
  const QByteArray garbage("{ \"format\": \"attnscope-session\", \"cases\": { truncated");
  writeAll(sidecar, garbage);
  ExportWindow w;
  QVERIFY(w.open(dump.path, kCase, 3, Mode::unfused));
  const SessionFile* session = w.window->annotations()->session();
  QVERIFY(session != nullptr);
  QCOMPARE(session->notes().size(), 1);
  QVERIFY2(session->notes()[0].contains(QStringLiteral("not valid JSON")),
           qPrintable(session->notes()[0]));
  const QStringList aside =
      QDir(dump.dir.path()).entryList({QStringLiteral("seed_cases.h5.attnscope.json.corrupt-*")});
  QCOMPARE(aside.size(), 1);
  QCOMPARE(readAll(dump.dir.filePath(aside[0])), garbage);
  QVERIFY(w.errors.isEmpty());
  // Annotating starts a fresh, valid sidecar; the corrupt copy stays as it was.
  QVERIFY(w.window->annotations()->addAnnotation(
      makeAnnotation(AnnotationKind::text, QStringLiteral("S"), QPointF(1, 1), QPointF(1, 1),
                     QStringLiteral("x"))));
  QCOMPARE(readJson(sidecar)[QStringLiteral("format")].toString(),
           QStringLiteral("attnscope-session"));
  QCOMPARE(readAll(dump.dir.filePath(aside[0])), garbage);
}

void ExportTest::newer_session_version_keeps_unknown_fields() {
  SampleCopy dump;
  const QString sidecar = dump.path + QStringLiteral(".attnscope.json");
  const QByteArray newer = R"({"format": "attnscope-session", "version": 99,
    "future_top": {"x": 1},
    "cases": {"/fp16_score_overflow": {"batch": 0, "head": 3, "view": "S", "future_case": "keep",
      "annotations": [
        {"kind": "text", "view": "S", "batch": 0, "head": 3, "from": [5, 6], "to": [5, 6],
         "text": "old note"},
        {"kind": "ellipse", "view": "S", "center": [1, 2]}]}}})";
  writeAll(sidecar, newer);
  ExportWindow w;
  w.window->context()->setPrecision(Precision::f16);
  w.window->context()->setMode(Mode::unfused);
  QVERIFY(w.window->openTarget({dump.path, kCase}));
  QVERIFY(waitForHead(*w.window, 3));
  AnnotationController* notes = w.window->annotations();
  const AnnotationBoard* board = w.window->context()->annotations();
  QCOMPARE(board->userAnnotations(QStringLiteral("S")).size(), 1);
  QCOMPARE(board->userAnnotations(QStringLiteral("S"))[0].text, QStringLiteral("old note"));
  QCOMPARE(notes->session()->readVersion(), 99);
  QVERIFY(
      notes->addAnnotation(makeAnnotation(AnnotationKind::box, QStringLiteral("S"), QPointF(0, 12),
                                          QPointF(63, 40), QStringLiteral("new box"))));
  // The newer file was backed up before the first rewrite; nothing it held was dropped.
  QCOMPARE(readAll(sidecar + QStringLiteral(".v99.bak")), newer);
  const QJsonObject saved = readJson(sidecar);
  QCOMPARE(saved[QStringLiteral("future_top")][QStringLiteral("x")].toInt(), 1);
  const QJsonObject c = saved[QStringLiteral("cases")][kCase].toObject();
  QCOMPARE(c[QStringLiteral("future_case")].toString(), QStringLiteral("keep"));
  QCOMPARE(c[QStringLiteral("annotations")].toArray().size(), 2);
  const QJsonArray unreadable = c[QStringLiteral("unreadable_annotations")].toArray();
  QCOMPARE(unreadable.size(), 1);
  QCOMPARE(unreadable[0][QStringLiteral("kind")].toString(), QStringLiteral("ellipse"));
}

}  // namespace attnscope::test
