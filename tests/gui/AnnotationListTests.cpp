// The annotation list dock and direct manipulation on the plot, in the real window on a copy
// of the sample: editing text in the list, deleting, selecting (jumps to the annotation's
// view), dragging an annotation and double-clicking it to edit its text; every change is in
// the sidecar file and comes back in a new window.
#include <QDockWidget>
#include <QInputDialog>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTreeWidget>
#include <QtTest>

#include "app/gui/AnnotationController.h"
#include "app/gui/NavigationController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/AnnotationListPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/InteractionTest.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {
namespace {

const QString kCase = QStringLiteral("/fp16_score_overflow");

// The annotations of kCase in the sidecar file as written on disk.
QJsonArray savedAnnotations(const QString& dump) {
  QFile f(dump + QStringLiteral(".attnscope.json"));
  if (!f.open(QIODevice::ReadOnly)) return {};
  const QJsonObject root = QJsonDocument::fromJson(f.readAll()).object();
  return root[QStringLiteral("cases")][kCase][QStringLiteral("annotations")].toArray();
}

bool openCase(ShownWindow& w, const QString& dump) {
  w.context()->setPrecision(Precision::f16);
  w.context()->setMode(Mode::unfused);
  if (!w.window->openTarget({dump, kCase})) return false;
  w.context()->setHead(3);
  return w.waitForHead(kCase, 3);
}

}  // namespace

void InteractionTest::annotation_list_edits_reach_the_sidecar() {
  SampleCopy dump;
  const Annotation note = makeAnnotation(AnnotationKind::text, QStringLiteral("S"), QPointF(10, 5),
                                         QPointF(10, 5), QStringLiteral("first"));
  const Annotation arrow =
      makeAnnotation(AnnotationKind::arrow, QStringLiteral("dS"), QPointF(50, 60), QPointF(20, 30),
                     QStringLiteral("NaN rows"));
  const Annotation box = makeAnnotation(AnnotationKind::box, QStringLiteral("S"), QPointF(0, 12),
                                        QPointF(63, 40), QStringLiteral("band"));
  {
    ShownWindow w;
    QVERIFY(openCase(w, dump.path));
    AnnotationController* notes = w.window->annotations();
    const AnnotationBoard* board = w.window->context()->annotations();
    for (const Annotation& a : {note, arrow, box}) QVERIFY(notes->addAnnotation(a));
    // The dock is in the Window menu like every other.
    QDockWidget* dock = w.window->findChild<QDockWidget*>(QStringLiteral("annotationListDock"));
    QVERIFY(w.window->docks().contains(dock));
    dock->show();
    dock->raise();
    AnnotationListPanel* list = w.window->annotationList();
    QTreeWidget* tree = list->tree();
    QCOMPARE(tree->topLevelItemCount(), 3);
    QCOMPARE(tree->topLevelItem(1)->text(0), QStringLiteral("arrow"));
    QCOMPARE(tree->topLevelItem(1)->text(1), QStringLiteral("NaN rows"));
    QCOMPARE(tree->topLevelItem(1)->text(2), QStringLiteral("dS"));
    QCOMPARE(tree->topLevelItem(1)->text(3), QStringLiteral("b0 h3"));
    QCOMPARE(tree->topLevelItem(1)->text(4), QStringLiteral("(60.0, 50.0) → (30.0, 20.0)"));

    // Selecting the arrow shows the dS tab zoomed around it (rows 22-68, keys 12-58).
    tree->setCurrentItem(tree->topLevelItem(1));
    QVERIFY(waitShown([&] { return !w.window->heatmaps()->regionPending(); }));
    QCOMPARE(w.window->heatmaps()->currentView()->name(), QStringLiteral("dS"));
    QCOMPARE(w.window->heatmaps()->currentView()->visibleWindow(), (MatrixWindow{22, 69, 12, 59}));

    // Editing the text in place rewrites the sidecar.
    tree->topLevelItem(0)->setText(1, QStringLiteral("edited note"));
    QCOMPARE(savedAnnotations(dump.path)[0][QStringLiteral("text")].toString(),
             QStringLiteral("edited note"));
    QCOMPARE(board->userAnnotations(QStringLiteral("S")).front().text,
             QStringLiteral("edited note"));
    // A text annotation cannot lose its text.
    tree->topLevelItem(0)->setText(1, QString());
    QCOMPARE(tree->topLevelItem(0)->text(1), QStringLiteral("edited note"));

    // Delete removes the selected arrow.
    tree->setCurrentItem(tree->topLevelItem(1));
    QVERIFY(list->deleteSelected());
    QCOMPARE(tree->topLevelItemCount(), 2);
    QCOMPARE(savedAnnotations(dump.path).size(), 2);
    QVERIFY(board->userAnnotations(QStringLiteral("dS")).isEmpty());
    w.window->close();
  }
  ShownWindow w;
  QVERIFY(openCase(w, dump.path));
  Annotation edited = note;
  edited.text = QStringLiteral("edited note");
  QCOMPARE(w.window->context()->annotations()->caseAnnotations(), (QList<Annotation>{edited, box}));
  QCOMPARE(w.window->annotationList()->tree()->topLevelItemCount(), 2);
  QCOMPARE(w.window->annotationList()->tree()->topLevelItem(0)->text(1),
           QStringLiteral("edited note"));
  QVERIFY(w.errors.isEmpty());
}

void InteractionTest::annotations_move_and_edit_on_the_plot() {
  SampleCopy dump;
  const Annotation note =
      makeAnnotation(AnnotationKind::text, QStringLiteral("S"), QPointF(30, 100), QPointF(30, 100),
                     QStringLiteral("drag me"));
  const Annotation box = makeAnnotation(AnnotationKind::box, QStringLiteral("S"), QPointF(70, 60),
                                        QPointF(110, 90), QStringLiteral("rename me"));
  {
    ShownWindow w;
    QVERIFY(openCase(w, dump.path));
    AnnotationController* notes = w.window->annotations();
    const AnnotationBoard* board = w.window->context()->annotations();
    QVERIFY(notes->addAnnotation(note));
    QVERIFY(notes->addAnnotation(box));
    HeatmapView* s = w.window->heatmaps()->view(HeadView::s);
    auto* plot = s->findChild<QWidget*>(QStringLiteral("heatmapPlot_S"));
    AnnotationLayer* layer = AnnotationLayer::of(s);
    QTest::qWait(100);  // drawn
    // Without a tool, dragging the label moves the annotation by the dragged distance.
    const QPoint from = layer->toPixel(QPointF(30, 100));
    const QPoint to = layer->toPixel(QPointF(42, 110));
    QCOMPARE(layer->userAnnotationAt(from), 0);
    QTest::mousePress(plot, Qt::LeftButton, {}, from);
    QTest::mouseMove(plot, (from + to) / 2);
    QTest::mouseMove(plot, to);
    QTest::mouseRelease(plot, Qt::LeftButton, {}, to);
    const Annotation moved = board->userAnnotations(QStringLiteral("S")).front();
    QCOMPARE(moved.text, QStringLiteral("drag me"));
    QVERIFY2(std::abs(moved.from.x() - 42) < 0.6 && std::abs(moved.from.y() - 110) < 0.6,
             qPrintable(QStringLiteral("%1, %2").arg(moved.from.x()).arg(moved.from.y())));
    QCOMPARE(moved.to, moved.from);
    const QJsonArray saved = savedAnnotations(dump.path);
    QCOMPARE(saved[0][QStringLiteral("from")].toArray()[0].toDouble(), moved.from.x());
    QCOMPARE(saved[0][QStringLiteral("from")].toArray()[1].toDouble(), moved.from.y());
    // The drag moved the annotation, not the view.
    QCOMPARE(s->visibleWindow(), (MatrixWindow{0, 128, 0, 128}));

    // A double-click on the box's edge asks for its text.
    const QPoint edge = layer->toPixel(QPointF(90, 90));
    QCOMPARE(layer->userAnnotationAt(edge), 1);
    QTest::mouseDClick(plot, Qt::LeftButton, {}, edge);
    QInputDialog* ask = nullptr;
    QVERIFY(waitShown([&] {
      ask = w.window->findChild<QInputDialog*>(QStringLiteral("annotationTextDialog"));
      return ask != nullptr && ask->isVisible();
    }));
    QCOMPARE(ask->textValue(), QStringLiteral("rename me"));
    ask->setTextValue(QStringLiteral("renamed box"));
    ask->accept();
    QCOMPARE(board->userAnnotations(QStringLiteral("S")).last().text,
             QStringLiteral("renamed box"));
    QCOMPARE(savedAnnotations(dump.path)[1][QStringLiteral("text")].toString(),
             QStringLiteral("renamed box"));
    // Automatic markers cannot be grabbed: a press elsewhere pans as before.
    QCOMPARE(layer->userAnnotationAt(layer->toPixel(QPointF(5, 5))), -1);
  }
  ShownWindow w;
  QVERIFY(openCase(w, dump.path));
  const QList<Annotation> back = w.window->context()->annotations()->caseAnnotations();
  QCOMPARE(back.size(), 2);
  QVERIFY(std::abs(back[0].from.x() - 42) < 0.6 && std::abs(back[0].from.y() - 110) < 0.6);
  QCOMPARE(back[1].text, QStringLiteral("renamed box"));
  QCOMPARE(back[1].from, box.from);
  QVERIFY(w.errors.isEmpty());
}

}  // namespace attnscope::test
