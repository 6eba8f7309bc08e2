// The heatmap image pinned pixel by pixel: exact colormap colours at cell centres for linear and
// log scales, the four overlay colours, non-uniform pooled edges, a single NaN among more cells
// than pixels, the image inside PNG / PDF / SVG exports, and hidden tabs drawn only when shown.
#include <qcustomplot.h>

#include <QRegularExpression>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <cmath>
#include <limits>
#include <memory>

#include "app/plot/AnnotationLayer.h"
#include "app/plot/HeatmapImage.h"
#include "app/plot/HeatmapView.h"

namespace attnscope::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<int64_t> unitEdges(int64_t n) {
  std::vector<int64_t> e(static_cast<size_t>(n + 1));
  for (int64_t i = 0; i <= n; ++i) e[static_cast<size_t>(i)] = i;
  return e;
}

// A full-resolution grid of `values` ([rows x cols]); classes from the values, `masked` cells
// (row-major indices) marked masked.
std::shared_ptr<MatrixGrid> fullGrid(int64_t rows, int64_t cols, std::vector<float> values,
                                     const std::vector<size_t>& masked = {}) {
  auto g = std::make_shared<MatrixGrid>();
  g->name = "S";
  g->rows = g->total_rows = rows;
  g->cols = g->total_cols = cols;
  g->row_edges = unitEdges(rows);
  g->col_edges = unitEdges(cols);
  g->raw = values;
  g->cls.resize(values.size());
  for (size_t e = 0; e < values.size(); ++e) {
    const float v = values[e];
    g->cls[e] = std::isnan(v)   ? CellClass::nan
                : std::isinf(v) ? (v > 0 ? CellClass::pos_inf : CellClass::neg_inf)
                                : CellClass::finite;
  }
  for (size_t e : masked) g->cls[e] = CellClass::masked;
  for (size_t e = 0; e < values.size(); ++e) {
    if (g->cls[e] != CellClass::finite) values[e] = kNaN;
  }
  g->value = std::move(values);
  return g;
}

// A shown view of `grid` (fixed range [lo, hi] on `scale`).
std::unique_ptr<HeatmapView> shownView(std::shared_ptr<const MatrixGrid> grid, ColormapKind map,
                                       ScaleKind scale, double lo, double hi) {
  auto view =
      std::make_unique<HeatmapView>(QStringLiteral("S"), map, HeatmapAxes{"query i", "key j"});
  view->resize(640, 560);
  view->show();
  if (!QTest::qWaitForWindowExposed(view.get())) return nullptr;
  view->setScaleKind(scale);
  view->setColorRange(lo, hi);
  view->setGrid(std::move(grid), true);
  return view;
}

QImage screenshot(HeatmapView& view) {
  view.plot()->replot(QCustomPlot::rpImmediateRefresh);
  return view.plot()->grab().toImage().convertToFormat(QImage::Format_RGB32);
}

// Widget pixel at element coordinate (row, col).
QPoint pixelAt(HeatmapView& view, double row, double col) {
  return {static_cast<int>(view.plot()->xAxis->coordToPixel(col)),
          static_cast<int>(view.plot()->yAxis->coordToPixel(row))};
}

QRgb rgb(const QColor& c) {
  return c.rgb();
}

int countColor(const QImage& image, QRgb color) {
  int n = 0;
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x) n += (image.pixel(x, y) | 0xff000000u) == color;
  }
  return n;
}

}  // namespace

class HeatmapImageTest : public QObject {
  Q_OBJECT

 private slots:
  void linear_cells_get_exact_colormap_and_overlay_colours();
  void log_scale_cells_get_exact_colormap_colours();
  void pooled_edges_and_single_nan_drawn_where_they_are();
  void nan_among_more_cells_than_pixels_stays_visible();
  void exports_contain_the_image_in_png_pdf_svg();
  void hidden_heatmap_tab_replots_only_when_shown();
  void matrix_axes_tick_whole_indices_only();
};

void HeatmapImageTest::linear_cells_get_exact_colormap_and_overlay_colours() {
  // Row 0: -2 .. 2 over the range [-2, 2]; row 1: NaN, +inf, -inf, masked, 0.
  auto grid = fullGrid(2, 5, {-2, -1, 0, 1, 2, kNaN, kInf, -kInf, 7, 0}, {8});
  auto view = shownView(grid, ColormapKind::diverging, ScaleKind::linear, -2, 2);
  QVERIFY(view);
  const QImage shot = screenshot(*view);
  for (int c = 0; c < 5; ++c) {
    const QRgb want = rgb(colormapColor(ColormapKind::diverging, c / 4.0));
    QCOMPARE(view->image()->cellColor(c), want);
    QCOMPARE(shot.pixel(pixelAt(*view, 0, c)), want);
  }
  QCOMPARE(rgb(colormapColor(ColormapKind::diverging, 0.5)),
           rgb(colormapStops(ColormapKind::diverging)[5].second));
  const CellClass overlays[] = {CellClass::nan, CellClass::pos_inf, CellClass::neg_inf,
                                CellClass::masked};
  for (int c = 0; c < 4; ++c) {
    QCOMPARE(shot.pixel(pixelAt(*view, 1, c)), rgb(overlayColor(overlays[c])));
  }
  QCOMPARE(shot.pixel(pixelAt(*view, 1, 4)), rgb(colormapColor(ColormapKind::diverging, 0.5)));
  // Values outside the range clamp to the end colours.
  view->setColorRange(-1, 1);
  const QImage clamped = screenshot(*view);
  QCOMPARE(clamped.pixel(pixelAt(*view, 0, 0)),
           rgb(colormapStops(ColormapKind::diverging)[0].second));
  QCOMPARE(clamped.pixel(pixelAt(*view, 0, 4)),
           rgb(colormapStops(ColormapKind::diverging).back().second));
}

void HeatmapImageTest::log_scale_cells_get_exact_colormap_colours() {
  // 1e-3 .. 10 are evenly spaced in log10 over [1e-3, 10]; 0 has no log and takes the low end.
  auto grid = fullGrid(1, 6, {1e-3f, 1e-2f, 0.1f, 1.0f, 10.0f, 0.0f});
  auto view = shownView(grid, ColormapKind::sequential, ScaleKind::log, 1e-3, 10);
  QVERIFY(view);
  const QImage shot = screenshot(*view);
  for (int c = 0; c < 5; ++c) {
    QCOMPARE(shot.pixel(pixelAt(*view, 0, c)),
             rgb(colormapColor(ColormapKind::sequential, c / 4.0)));
  }
  QCOMPARE(shot.pixel(pixelAt(*view, 0, 5)),
           rgb(colormapStops(ColormapKind::sequential)[0].second));
  // symlog of a symmetric range puts 0 in the middle of a diverging map.
  view->setColormap(ColormapKind::diverging);
  view->setScaleKind(ScaleKind::symlog);
  view->setColorRange(-10, 10);
  QCOMPARE(screenshot(*view).pixel(pixelAt(*view, 0, 5)),
           rgb(colormapStops(ColormapKind::diverging)[5].second));
}

void HeatmapImageTest::pooled_edges_and_single_nan_drawn_where_they_are() {
  // 3 x 4 cells pooled over 300 x 400 elements with uneven column edges; cell (1, 2) holds one
  // NaN (elements 250..259), every other cell the value 1.
  auto g = fullGrid(3, 4, std::vector<float>(12, 1.0f));
  g->pooled = true;
  g->raw.clear();
  g->total_rows = 300;
  g->total_cols = 400;
  g->row_edges = {0, 100, 200, 300};
  g->col_edges = {0, 50, 250, 260, 400};
  g->cell_min = g->cell_max = g->value;
  g->cls[6] = CellClass::nan;
  g->value[6] = kNaN;
  auto view = shownView(g, ColormapKind::sequential, ScaleKind::linear, 0, 1);
  QVERIFY(view);
  const QImage shot = screenshot(*view);
  const QRgb nan = rgb(overlayColor(CellClass::nan));
  const QRgb one = rgb(colormapStops(ColormapKind::sequential).back().second);
  QCOMPARE(shot.pixel(pixelAt(*view, 150, 254.5)), nan);  // centre of the narrow NaN cell
  QCOMPARE(shot.pixel(pixelAt(*view, 150, 240)), one);    // wide cell to its left
  QCOMPARE(shot.pixel(pixelAt(*view, 150, 275)), one);    // cell to its right
  QCOMPARE(shot.pixel(pixelAt(*view, 50, 254.5)), one);   // the row above
  // The hover readout maps the same element to the same cell.
  QCOMPARE(g->readout(150, 254).cls, CellClass::nan);
  // Zoomed into the NaN cell's neighbourhood the image follows the axes.
  view->zoomTo({140, 160, 240, 280});
  const QImage zoomed = screenshot(*view);
  QCOMPARE(zoomed.pixel(pixelAt(*view, 150, 250)), nan);
  QCOMPARE(zoomed.pixel(pixelAt(*view, 150, 259)), nan);
  QCOMPARE(zoomed.pixel(pixelAt(*view, 150, 248)), one);
  QCOMPARE(zoomed.pixel(pixelAt(*view, 150, 261)), one);
}

void HeatmapImageTest::nan_among_more_cells_than_pixels_stays_visible() {
  // 3 rows x 6000 columns at full resolution: far more columns than pixels. One NaN in the
  // middle row; +inf and the largest finite value beside it lose to it.
  std::vector<float> values(3 * 6000, 0.25f);
  values[6000 + 3217] = kNaN;
  values[6000 + 3218] = kInf;
  values[6000 + 3216] = 1.0f;
  auto view =
      shownView(fullGrid(3, 6000, values), ColormapKind::sequential, ScaleKind::linear, 0, 1);
  QVERIFY(view);
  const QImage shot = screenshot(*view);
  const int y = pixelAt(*view, 1, 0).y();
  const QImage middle = shot.copy(0, y, shot.width(), 1);
  QCOMPARE(countColor(middle, rgb(overlayColor(CellClass::nan))), 1);
  const int top = pixelAt(*view, 0, 0).y();
  QCOMPARE(countColor(shot.copy(0, top, shot.width(), 1), rgb(overlayColor(CellClass::nan))), 0);
}

void HeatmapImageTest::exports_contain_the_image_in_png_pdf_svg() {
  std::vector<float> values(64 * 64);
  for (size_t i = 0; i < values.size(); ++i) values[i] = std::sin(0.05f * static_cast<float>(i));
  values[20 * 64 + 40] = kNaN;
  auto view =
      shownView(fullGrid(64, 64, values), ColormapKind::diverging, ScaleKind::linear, -1, 1);
  QVERIFY(view);
  QTemporaryDir dir;
  const QRgb nan = rgb(overlayColor(CellClass::nan));
  QString error;
  const QString png = dir.filePath(QStringLiteral("s.png"));
  QVERIFY2(view->exportTo(png, &error), qPrintable(error));
  const QImage pngImage(png);
  // 2x PNG: the NaN cell is about (2 * cell pixels)^2 magenta pixels.
  QVERIFY(countColor(pngImage, nan) >= 16);

  const QString svg = dir.filePath(QStringLiteral("s.svg"));
  QVERIFY2(view->exportTo(svg, &error), qPrintable(error));
  QFile svgFile(svg);
  QVERIFY(svgFile.open(QIODevice::ReadOnly));
  const QString svgText = QString::fromUtf8(svgFile.readAll());
  // The largest embedded image is the heatmap (the colour bar is another, narrow one).
  QImage embedded;
  auto images =
      QRegularExpression(QStringLiteral("<image[^>]*xlink:href=\"data:image/png;base64,([^\"]+)\""))
          .globalMatch(svgText);
  while (images.hasNext()) {
    QImage image;
    QVERIFY(
        image.loadFromData(QByteArray::fromBase64(images.next().captured(1).toLatin1()), "PNG"));
    if (image.width() * image.height() > embedded.width() * embedded.height()) embedded = image;
  }
  QVERIFY2(embedded.width() >= 64 && embedded.height() >= 64, "no heatmap image in the SVG");
  QVERIFY(countColor(embedded, nan) >= 4);

  const QString pdf = dir.filePath(QStringLiteral("s.pdf"));
  QVERIFY2(view->exportTo(pdf, &error), qPrintable(error));
  QFile pdfFile(pdf);
  QVERIFY(pdfFile.open(QIODevice::ReadOnly));
  const QByteArray pdfBytes = pdfFile.readAll();
  QVERIFY2(pdfBytes.contains("/Subtype /Image"), "no image XObject in the PDF");
  int widest = 0;  // the heatmap is the widest image XObject (the colour bar is narrow)
  auto widths = QRegularExpression(QStringLiteral("/Width (\\d+)"))
                    .globalMatch(QString::fromLatin1(pdfBytes));
  while (widths.hasNext()) widest = std::max(widest, widths.next().captured(1).toInt());
  QVERIFY(widest >= 64);
}

void HeatmapImageTest::hidden_heatmap_tab_replots_only_when_shown() {
  QTabWidget tabs;
  auto* front = new HeatmapView(HeadView::s);
  auto* back = new HeatmapView(HeadView::p);
  tabs.addTab(front, QStringLiteral("S"));
  tabs.addTab(back, QStringLiteral("P"));
  tabs.resize(640, 560);
  tabs.show();
  QVERIFY(QTest::qWaitForWindowExposed(&tabs));
  int frontReplots = 0, backReplots = 0;
  connect(front->plot(), &QCustomPlot::afterReplot, this, [&] { ++frontReplots; });
  connect(back->plot(), &QCustomPlot::afterReplot, this, [&] { ++backReplots; });
  auto grid = fullGrid(2, 2, {1, 2, 3, kNaN});
  Annotation marker;
  marker.kind = AnnotationKind::text;
  marker.text = QStringLiteral("note");
  for (int result = 0; result < 3; ++result) {  // what every new result does to each tab
    for (HeatmapView* v : {front, back}) {
      v->setGrid(grid, result == 0);
      v->setStamp(QStringLiteral("result %1").arg(result));
      v->setHighlight(MatrixWindow{0, 1, 0, 1});
      AnnotationLayer::of(v)->setAnnotations({marker});
    }
    QCoreApplication::processEvents();
  }
  QCOMPARE(frontReplots, 3);  // once per result
  QCOMPARE(backReplots, 0);
  tabs.setCurrentWidget(back);
  QCoreApplication::processEvents();
  QVERIFY(backReplots >= 1);
  const QImage shot = back->plot()->grab().toImage().convertToFormat(QImage::Format_RGB32);
  QCOMPARE(shot.pixel(pixelAt(*back, 1, 1)), rgb(overlayColor(CellClass::nan)));
  QCOMPARE(back->stamp(), QStringLiteral("result 2"));
}

void HeatmapImageTest::matrix_axes_tick_whole_indices_only() {
  // A 14 x 14 matrix (MiniLM's padded batch): the default ticker would put ticks at 2.5, 7.5.
  auto view = shownView(fullGrid(14, 14, std::vector<float>(196, 1.f)), ColormapKind::sequential,
                        ScaleKind::linear, 0, 2);
  QVERIFY(view != nullptr);
  auto* plot = view->findChild<QCustomPlot*>();
  plot->replot();
  for (QCPAxis* axis : {plot->xAxis, plot->yAxis}) {
    QVector<double> ticks;
    QVector<QString> labels;
    axis->ticker()->generate(axis->range(), QLocale(), QLatin1Char('g'), 6, ticks, nullptr,
                             &labels);
    QVERIFY(ticks.size() >= 2);
    for (double t : ticks) QVERIFY2(t == std::round(t), qPrintable(QString::number(t)));
  }
}

}  // namespace attnscope::test

QTEST_MAIN(attnscope::test::HeatmapImageTest)
#include "HeatmapImageTests.moc"
