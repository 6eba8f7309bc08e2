// User annotations on the row plot: a box dragged with the Box tool onto the l series of a case
// is listed in the Annotations dock, written to the sidecar with view "row l", drawn into the
// row plot's SVG export, and is back on the same series after closing and reopening the dump.
// Selecting a row-plot annotation in the Annotations dock shows the row plot dock on its series
// at its batch / head.
#include <QJsonDocument>
#include <QJsonObject>
#include <QTabWidget>
#include <QTreeWidget>
#include <QtTest>

#include "app/export/SessionFile.h"
#include "app/gui/AnnotationController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/AnnotationListPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/PanelReveal.h"
#include "app/panels/RowPlotPanel.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/RowPlotView.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {
namespace {

const QString kCase = QStringLiteral("/padding_mask_fp16");

}  // namespace

void ViewGapTest::row_plot_annotations_persist_and_export() {
  SampleCopy dump;
  const QString svg = dump.dir.filePath(QStringLiteral("rows.svg"));
  {
    ShownWindow w;
    QVERIFY(w.window->openTarget({dump.path, kCase}));
    QVERIFY(w.waitForHead(kCase, 0));
    RowPlotPanel* rows = w.window->rowPlots();
    revealPanel(rows);  // the Row plots page, as a click on its tab
    rows->showSeries(RowSeriesKind::l);
    AnnotationController* notes = w.window->annotations();
    const AnnotationBoard* board = w.window->context()->annotations();
    notes->setTool(AnnotationTool::box);
    notes->setLabel(QStringLiteral("l drops here"));
    // The plot widget (QCustomPlot, the view's only child widget); its centre is inside the axes.
    auto* plot = rows->plot()->findChild<QWidget*>(QString(), Qt::FindDirectChildrenOnly);
    QVERIFY(plot != nullptr && plot->isVisible());
    const QPoint centre = plot->rect().center();
    const QPoint from = centre - QPoint(40, 20), to = centre + QPoint(40, 20);
    QTest::mousePress(plot, Qt::LeftButton, Qt::NoModifier, from);
    QTest::mouseMove(plot, to);
    QTest::mouseRelease(plot, Qt::LeftButton, Qt::NoModifier, to);
    notes->setTool(AnnotationTool::none);
    const QList<Annotation> placed = board->caseAnnotations();
    QCOMPARE(placed.size(), 1);
    QCOMPARE(placed[0].view, QStringLiteral("row l"));
    QCOMPARE(placed[0].kind, AnnotationKind::box);
    AnnotationLayer* layer = AnnotationLayer::of(rows->plot());
    QCOMPARE(placed[0].from.x(), layer->toData(from).x());
    QCOMPARE(layer->annotations().size(), 1);
    QCOMPARE(w.window->annotationList()->tree()->topLevelItemCount(), 1);
    QCOMPARE(w.window->annotationList()->tree()->topLevelItem(0)->text(2), QStringLiteral("row l"));
    // Another series does not show it; the export of the l series does.
    rows->showSeries(RowSeriesKind::m_lse);
    QCOMPARE(layer->annotations().size(), 0);
    rows->showSeries(RowSeriesKind::l);
    QString error;
    QVERIFY2(rows->plot()->exportTo(svg, &error), qPrintable(error));
    w.window->close();
  }
  QFile f(svg);
  QVERIFY(f.open(QIODevice::ReadOnly));
  QVERIFY(f.readAll().contains("l drops here"));
  QFile sidecar(SessionFile::besidePath(dump.path));
  QVERIFY(sidecar.open(QIODevice::ReadOnly));
  const QJsonObject c =
      QJsonDocument::fromJson(sidecar.readAll())[QStringLiteral("cases")][kCase].toObject();
  QCOMPARE(c[QStringLiteral("annotations")][0][QStringLiteral("view")].toString(),
           QStringLiteral("row l"));

  ShownWindow w;
  QVERIFY(w.window->openTarget({dump.path, kCase}));
  QVERIFY(w.waitForHead(kCase, 0));
  w.window->rowPlots()->showSeries(RowSeriesKind::l);
  const QList<Annotation> back = AnnotationLayer::of(w.window->rowPlots()->plot())->annotations();
  QCOMPARE(back.size(), 1);
  QCOMPARE(back[0].text, QStringLiteral("l drops here"));
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test

namespace attnscope::test {

void ViewGapTest::annotation_list_jumps_to_row_plot_series() {
  SampleCopy dump;
  ShownWindow w;
  QVERIFY(w.window->openTarget({dump.path, kCase}));
  QVERIFY(w.waitForHead(kCase, 0));
  Annotation note;
  note.kind = AnnotationKind::text;
  note.view = QStringLiteral("row ||O_i||");
  note.batch = 1;
  note.head = 2;
  note.from = note.to = QPointF(80, 0.5);
  note.text = QStringLiteral("padded rows");
  QString error;
  QVERIFY2(w.window->annotations()->addAnnotation(note, &error), qPrintable(error));

  // The row plot shows another series and the heatmaps page is in front, showing head 0.
  RowPlotPanel* rows = w.window->rowPlots();
  rows->showSeries(RowSeriesKind::m_lse);
  w.window->pages()->setCurrentIndex(0);
  QVERIFY(!rows->isVisible());
  const int tab = w.window->heatmaps()->tabs()->currentIndex();

  QTreeWidget* list = w.window->annotationList()->tree();
  QCOMPARE(list->topLevelItemCount(), 1);
  list->setCurrentItem(list->topLevelItem(0));
  QVERIFY(rows->isVisible());
  QCOMPARE(rows->series(), RowSeriesKind::o_norm);
  QCOMPARE(w.context()->batch(), int64_t{1});
  QCOMPARE(w.context()->head(), int64_t{2});
  QCOMPARE(w.window->heatmaps()->tabs()->currentIndex(), tab);
  QVERIFY(w.waitForHead(kCase, 2));
  QCOMPARE(w.context()->result()->request.batch, int64_t{1});
  const QList<Annotation> shown = AnnotationLayer::of(rows->plot())->annotations();
  QCOMPARE(shown.size(), 1);
  QCOMPARE(shown[0].text, QStringLiteral("padded rows"));
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
