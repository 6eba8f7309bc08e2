// The views of the real MainWindow: inspector readout and pins, export, zoom-driven recompute
// of pooled heatmaps, the row plots with their thresholds, and colour maps chosen by the values.
#include <QImage>
#include <QPushButton>
#include <QTreeWidget>
#include <QtTest>
#include <cmath>

#include "app/gui/ComputeWorker.h"
#include "app/gui/SessionContext.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/InspectorPanel.h"
#include "app/panels/RowPlotPanel.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/RowPlotView.h"
#include "tests/gui/GuiTest.h"

namespace attnscope::test {

void GuiTest::inspector_shows_fp16_and_bf16_bits() {
  const ValueBits max = describeValue(65504.0f);
  QVERIFY2(max.fp16.contains(QStringLiteral("0x7bff")), qPrintable(max.fp16));
  QVERIFY(max.fp32.contains(QStringLiteral("0x477fe000")));
  QVERIFY(max.bf16.contains(QStringLiteral("65536 (0x4780)")));
  QVERIFY(describeValue(65520.0f).fp16.contains(QStringLiteral("+inf (0x7c00)")));
  QVERIFY(describeValue(1.0f).bf16.contains(QStringLiteral("0x3f80")));

  WindowFixture f;
  CellReadout r;
  r.matrix = "S";
  r.row = 12;
  r.col = 40;
  r.block = {12, 13, 40, 41};
  r.value = r.min = r.max = 65504.0f;
  f.context()->setHovered(r);
  const QString text = f.window->inspector()->readoutText();
  QVERIFY2(text.contains(QStringLiteral("S [12, 40]")), qPrintable(text));
  QVERIFY(text.contains(QStringLiteral("65504 (0x7bff)")));
  QVERIFY(text.contains(QStringLiteral("finite")));
}

void GuiTest::hover_and_click_pin_a_cell() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  HeatmapView* s = f.window->heatmaps()->view(HeadView::s);
  s->hoverCell(5, 7);
  const CellReadout& hovered = f.context()->hovered();
  QCOMPARE(hovered.row, int64_t{5});
  QCOMPARE(hovered.col, int64_t{7});
  const float value = f.context()->result()->s->raw[5 * 128 + 7];
  QCOMPARE(hovered.value, value);
  const QString text = f.window->inspector()->readoutText();
  QVERIFY2(text.contains(QStringLiteral("S [5, 7]")), qPrintable(text));
  QVERIFY(text.contains(describeValue(value).fp16));

  // A real mouse move over the plot reaches the inspector too.
  QWidget* plot = s->findChild<QWidget*>(QStringLiteral("heatmapPlot_S"));
  QVERIFY(plot != nullptr);
  f.window->context()->showView(HeadView::s);
  QTest::mouseMove(plot, plot->rect().center());
  QTRY_VERIFY(f.context()->hovered().row != 5 || f.context()->hovered().col != 7);

  QCOMPARE(f.window->inspector()->pinnedCount(), 0);
  s->clickCell(20, 30);
  QCOMPARE(f.window->inspector()->pinnedCount(), 1);
  QTest::mouseClick(plot, Qt::LeftButton, {}, plot->rect().center());
  QCOMPARE(f.window->inspector()->pinnedCount(), 2);
}

void GuiTest::pins_belong_to_their_case() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  InspectorPanel* inspector = f.window->inspector();
  f.context()->setHead(3);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.request.head == 3; }));
  f.window->heatmaps()->view(HeadView::s)->clickCell(20, 30);
  QCOMPARE(inspector->pinnedCount(), 1);
  QCOMPARE(inspector->pinnedList()->topLevelItem(0)->text(0), QStringLiteral("S [20, 30]"));
  QCOMPARE(inspector->pinnedList()->topLevelItem(0)->text(1), QStringLiteral("b0 h3"));

  // Another case shows its own pins only; the first case's come back with it.
  const QString other = QStringLiteral("/exploding_grad");
  QVERIFY(f.context()->selectCase(f.context()->fileIndex(), other));
  QCOMPARE(inspector->pinnedCount(), 0);
  QVERIFY(waitForResult(*f.window,
                        [&](const HeadResult& r) { return r.case_path == other.toStdString(); }));
  f.window->heatmaps()->view(HeadView::s)->clickCell(1, 2);
  QCOMPARE(inspector->pinnedCount(), 1);
  QCOMPARE(inspector->pinnedList()->topLevelItem(0)->text(0), QStringLiteral("S [1, 2]"));
  QVERIFY(f.context()->selectCase(f.context()->fileIndex(), kOverflowCase));
  QCOMPARE(inspector->pinnedCount(), 1);
  QCOMPARE(inspector->pinnedList()->topLevelItem(0)->text(0), QStringLiteral("S [20, 30]"));
  QCOMPARE(inspector->pinnedList()->topLevelItem(0)->text(1), QStringLiteral("b0 h3"));

  // "Clear pins" clears the selected case's pins only.
  auto* clear = inspector->findChild<QPushButton*>(QStringLiteral("clearPins"));
  QVERIFY(clear != nullptr);
  clear->click();
  QCOMPARE(inspector->pinnedCount(), 0);
  QVERIFY(f.context()->selectCase(f.context()->fileIndex(), other));
  QCOMPARE(inspector->pinnedCount(), 1);
}

void GuiTest::export_writes_png_and_pdf_atomically() {
  WindowFixture f;
  QTemporaryDir dir;
  QString error;
  QVERIFY(!f.window->exportCurrentView(dir.filePath(QStringLiteral("early.png")), &error));
  QVERIFY(error.contains(QStringLiteral("nothing to export")));
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));

  const QString png = dir.filePath(QStringLiteral("s.png"));
  QVERIFY2(f.window->exportCurrentView(png, &error), qPrintable(error));
  const QImage image(png);
  QVERIFY(!image.isNull());
  QVERIFY(image.width() > 200 && image.height() > 200);
  const QString pdf = dir.filePath(QStringLiteral("s.pdf"));
  QVERIFY2(f.window->exportCurrentView(pdf, &error), qPrintable(error));
  QFile file(pdf);
  QVERIFY(file.open(QIODevice::ReadOnly));
  QVERIFY(file.size() > 1000);
  QCOMPARE(file.read(5), QByteArray("%PDF-"));
  // Overwriting keeps a complete file; unsupported formats fail and leave nothing behind.
  QVERIFY(f.window->exportCurrentView(png, &error));
  QVERIFY(!f.window->exportCurrentView(dir.filePath(QStringLiteral("s.bmp")), &error));
  QVERIFY(error.contains(QStringLiteral("unsupported")));
  QVERIFY(!f.window->exportCurrentView(QStringLiteral("/nonexistent-dir/x.png"), &error));
  QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden),
           QStringList({QStringLiteral("s.pdf"), QStringLiteral("s.png")}));
  // The stamp names the file, case, head and settings.
  const QString stamp = f.window->heatmaps()->currentView()->stamp();
  for (const char* part : {"seed_cases.h5", "/fp16_score_overflow", "b0 h0", "fp16 fused",
                           "scale 0.125", "mask -inf"}) {
    QVERIFY2(stamp.contains(QLatin1String(part)), qPrintable(stamp));
  }
}

void GuiTest::zoom_recomputes_pooled_window() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/healthy_b2_h8_s1024")}));
  HeatmapView* s = f.window->heatmaps()->view(HeadView::s);
  // The pooled grid follows the map's size in pixels once the layout has settled, to within
  // the eighth that SessionContext::setScoreView lets pass without a recompute (axis labels
  // nudge the plot by a few pixels after each result).
  const auto close = [](int64_t a, int64_t b) { return std::abs(a - b) <= std::max(a, b) / 8; };
  QVERIFY(waitForResult(*f.window, [s, close](const HeadResult& r) {
    const QSize pixels = s->plotPixelSize();
    return r.s->pooled && close(r.request.out_rows, pixels.height()) &&
           close(r.request.out_cols, pixels.width());
  }));
  QTRY_VERIFY(s->grid() != nullptr && s->grid()->pooled);
  QVERIFY(s->grid()->rows < 1024 && s->grid()->cols < 1024);
  QCOMPARE(s->grid()->row_edges.back(), int64_t{1024});
  // Causal: the upper triangle is masked, and pooling keeps it apart from the values.
  QVERIFY(s->overlayCells(CellClass::masked) > 0);

  s->zoomTo({100, 164, 200, 264});
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return !r.s->pooled && r.s->row_edges.front() == 100 && r.s->col_edges.front() == 200;
  }));
  QTRY_VERIFY(!s->grid()->pooled);
  QCOMPARE(s->grid()->rows, int64_t{64});
  QCOMPARE(s->grid()->cols, int64_t{64});
  QCOMPARE(s->visibleWindow(), (MatrixWindow{100, 164, 200, 264}));  // the zoom stays

  s->zoomTo({0, 1024, 0, 1024});
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.s->pooled && r.s->row_edges.front() == 0 && r.s->row_edges.back() == 1024;
  }));
}

void GuiTest::row_plot_shows_series_and_thresholds() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  SessionContext* ctx = f.context();
  ctx->setHead(3);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.request.head == 3; }));
  RowPlotView* plot = f.window->rowPlots()->plot();
  QCOMPARE(plot->seriesCount(), 2);  // m and LSE
  // Fused fp16, head 3: scores reach ~1e5, so the fp16 max line is drawn next to m and LSE.
  QVERIFY2(plot->drawnThresholds().contains(QStringLiteral("fp16 max 65504")),
           qPrintable(plot->drawnThresholds().join(", ")));
  QCOMPARE(plot->nonfiniteMarkers(), int64_t{0});

  ctx->setMode(Mode::unfused);
  QVERIFY(waitForResult(*f.window,
                        [](const HeadResult& r) { return r.request.mode() == Mode::unfused; }));
  QVERIFY(plot->nonfiniteMarkers() > 0);  // rows 12-40 overflow: m / LSE are inf or NaN

  f.window->rowPlots()->showSeries(RowPlotPanel::Series::dq_norm);
  QCOMPARE(plot->seriesCount(), 1);
  QTemporaryDir dir;
  QString error;
  QVERIFY2(plot->exportTo(dir.filePath(QStringLiteral("rows.png")), &error), qPrintable(error));
}

}  // namespace attnscope::test

namespace attnscope::test {

void GuiTest::colour_maps_follow_the_values() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/train/step_000/layer_00")}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.request.head == 0; }));
  // The scores of this case are all positive (about 41 to 51): a sequential map over them.
  HeatmapView* s = f.window->heatmaps()->view(HeadView::s);
  f.window->context()->showView(HeadView::s);
  QTest::qWait(50);
  QVERIFY(s->automaticColormap());
  QCOMPARE(s->colorScale().map, ColormapKind::sequential);
  QVERIFY2(s->colorScale().lo > 30 && s->colorScale().hi < 60,
           qPrintable(QStringLiteral("%1..%2").arg(s->colorScale().lo).arg(s->colorScale().hi)));
  // dQ takes both signs: diverging around 0. A map the user picks stays.
  HeatmapView* dq = f.window->heatmaps()->view(HeadView::dq);
  f.window->context()->showView(HeadView::dq);
  QTest::qWait(50);
  QCOMPARE(dq->colorScale().map, ColormapKind::diverging);
  QCOMPARE(dq->colorScale().lo, -dq->colorScale().hi);
  dq->setColormap(ColormapKind::sequential);
  QVERIFY(!dq->automaticColormap());
  f.context()->setScale(0.2);
  QVERIFY(waitForResult(*f.window,
                        [](const HeadResult& r) { return std::abs(r.scale - 0.2) < 1e-12; }));
  QTest::qWait(50);
  QCOMPARE(dq->colorScale().map, ColormapKind::sequential);
}

}  // namespace attnscope::test
