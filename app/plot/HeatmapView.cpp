// Heatmap widget: QCustomPlot with the heatmap image, a colour scale, a legend of overlay counts
// and a range histogram.
#include "app/plot/HeatmapView.h"

#include <QComboBox>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QLabel>
#include <QResizeEvent>
#include <QTimer>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include "app/plot/IndexTicker.h"

#include "app/plot/HeatmapImage.h"
#include "app/plot/HeatmapLayers.h"
#include "app/plot/IndexTicker.h"
#include "app/plot/PlotExport.h"
#include "app/plot/RangeHistogram.h"

namespace attnscope {
namespace {

constexpr CellClass kLegendClasses[] = {CellClass::nan, CellClass::pos_inf, CellClass::neg_inf,
                                        CellClass::masked};
constexpr int kZoomDebounceMs = 200;
constexpr QSize kMinPlotSize(240, 180);

// Element i spans [i - 0.5, i + 0.5]: the first element a range shows, and one past the last.
int64_t firstElement(double lower, int64_t size) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::floor(lower + 0.5)), 0, size - 1);
}
int64_t endElement(double upper, int64_t size) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(upper + 0.5)), 1, size);
}

}  // namespace

HeatmapView::HeatmapView(HeadView view, QWidget* parent)
    : HeatmapView(QString::fromLatin1(head_view_name(view)),
                  view == HeadView::p ? ColormapKind::sequential : ColormapKind::diverging,
                  {QString::fromLatin1(head_view_row_label(view)),
                   QString::fromLatin1(head_view_col_label(view))},
                  parent) {}

HeatmapView::HeatmapView(const QString& name, ColormapKind colormap, const HeatmapAxes& axes,
                         QWidget* parent)
    : QWidget(parent), name_(name) {
  scale_.map = colormap;
  auto* bar = new QWidget(this);
  buildToolbar(bar);
  plot_ = new QCustomPlot(this);
  plot_->setObjectName(QStringLiteral("heatmapPlot_") + name);
  // The plot's own hint is its widest element (the title line, the legend); below this size
  // the title elides and the legend wraps instead of widening the window.
  plot_->setMinimumSize(kMinPlotSize);
  buildPlot(axes);
  histogram_ = new RangeHistogram(this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->setSpacing(2);
  layout->addWidget(bar);
  layout->addWidget(plot_, 1);
  layout->addWidget(histogram_);

  zoomTimer_ = new QTimer(this);
  zoomTimer_->setSingleShot(true);
  zoomTimer_->setInterval(kZoomDebounceMs);
  connect(zoomTimer_, &QTimer::timeout, this, [this] {
    if (grid_) emit viewWindowChanged(visibleWindow());
  });
  connect(histogram_, &RangeHistogram::rangeEdited, this, &HeatmapView::setColorRange);
  // Unticking "auto" keeps the range shown (a recompute, a clip, then changes the colours).
  connect(histogram_, &RangeHistogram::automaticToggled, this, [this](bool on) {
    if (on) {
      setAutoRange();
    } else {
      setColorRange(scale_.lo, scale_.hi);
    }
  });
}

HeatmapView::~HeatmapView() = default;

void HeatmapView::setIndexMap() {
  for (QCPAxis* axis : {plot_->xAxis, plot_->yAxis}) {
    axis->setTicker(indexTicker());
    axis->setSubTicks(false);
  }
  histogram_->setVisible(false);
  plot_->legend->setVisible(false);
  requestReplot();
}

void HeatmapView::setRowAxis(const QString& label, const QMap<double, QString>& names) {
  plot_->yAxis->setLabel(label);
  if (names.isEmpty()) {
    plot_->yAxis->setTicker(indexTicker());
  } else {
    QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
    ticker->setTicks(names);
    plot_->yAxis->setTicker(ticker);
  }
  requestReplot();
}

void HeatmapView::buildToolbar(QWidget* bar) {
  colormapBox_ = new QComboBox(bar);
  for (ColormapKind k : {ColormapKind::sequential, ColormapKind::diverging}) {
    colormapBox_->addItem(colormapName(k), static_cast<int>(k));
  }
  colormapBox_->setCurrentIndex(static_cast<int>(scale_.map));
  scaleBox_ = new QComboBox(bar);
  for (ScaleKind k : {ScaleKind::linear, ScaleKind::log, ScaleKind::symlog}) {
    scaleBox_->addItem(scaleName(k), static_cast<int>(k));
  }
  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(0, 0, 0, 0);
  row->addWidget(new QLabel(tr("colormap"), bar));
  row->addWidget(colormapBox_);
  row->addWidget(new QLabel(tr("scale"), bar));
  row->addWidget(scaleBox_);
  row->addStretch(1);
  connect(colormapBox_, &QComboBox::activated, this, [this](int index) {
    setColormap(static_cast<ColormapKind>(colormapBox_->itemData(index).toInt()));
  });
  connect(scaleBox_, &QComboBox::activated, this, [this](int index) {
    setScaleKind(static_cast<ScaleKind>(scaleBox_->itemData(index).toInt()));
  });
}

void HeatmapView::buildPlot(const HeatmapAxes& axes) {
  plot_->setMouseTracking(true);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->yAxis->setRangeReversed(true);  // row 0 at the top, like a matrix
  plot_->xAxis->setLabel(axes.cols);
  plot_->yAxis->setLabel(axes.rows);
  // Rows and columns are indices: no tick between two of them (2.5 on a 14-row matrix).
  plot_->xAxis->setTicker(indexTicker());
  plot_->yAxis->setTicker(indexTicker());

  title_ = new QCPTextElement(plot_, name_, QFont(font().family(), 9));
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0, title_);

  colorScale_ = new QCPColorScale(plot_);
  plot_->plotLayout()->addElement(1, 1, colorScale_);
  colorScale_->setBarWidth(12);
  ticker_ = QSharedPointer<ScaleTicker>(new ScaleTicker);
  colorScale_->axis()->setTicker(ticker_);
  auto* margins = new QCPMarginGroup(plot_);
  plot_->axisRect()->setMarginGroup(QCP::msBottom | QCP::msTop, margins);
  colorScale_->setMarginGroup(QCP::msBottom | QCP::msTop, margins);

  colorScale_->setGradient(makeGradient(scale_.map));
  // Dragging or wheeling the colour bar sets the range like the histogram's entries.
  connect(colorScale_, &QCPColorScale::dataRangeChanged, this, [this](const QCPRange& r) {
    if (applyingScale_) return;
    setColorRange(fromDisplay(scale_.scale, r.lower, scale_.linthresh),
                  fromDisplay(scale_.scale, r.upper, scale_.linthresh));
  });
  image_ = new HeatmapImage(plot_->xAxis, plot_->yAxis);

  // Legend entries: empty graphs whose square marker carries the overlay colour.
  plot_->legend->setVisible(true);
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  plot_->plotLayout()->addElement(2, 0, plot_->legend);
  plot_->plotLayout()->setRowStretchFactor(2, 0.001);
  plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  plot_->legend->setBorderPen(Qt::NoPen);
  plot_->legend->setFont(QFont(font().family(), 8));
  image_->removeFromLegend();
  for (int k = 0; k < 4; ++k) {
    QCPGraph* g = plot_->addGraph();
    const QColor c = overlayColor(kLegendClasses[k]);
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssSquare, c, c, 9));
    legendEntries_[k] = g;
  }
  // Finite values the range leaves to the end colours (an automatic range cuts 0.1 % each end).
  beyondEntry_ = plot_->addGraph();
  beyondEntry_->setLineStyle(QCPGraph::lsNone);
  beyondEntry_->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssSquare, QColor(0x40, 0x40, 0x40), Qt::white, 9));
  updateLegend();

  highlightRect_ = new QCPItemRect(plot_);
  highlightRect_->setPen(QPen(QColor(0xff, 0xd7, 0x00), 2.0));
  highlightRect_->setBrush(Qt::NoBrush);
  highlightRect_->setVisible(false);

  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          &HeatmapView::onAxisRangeChanged);
  connect(plot_->yAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          &HeatmapView::onAxisRangeChanged);
  // A view hidden behind another tab is filled only when it is drawn.
  connect(plot_, &QCustomPlot::beforeReplot, this, [this] {
    if (unfilled_) fill();
  });
  connect(plot_, &QCustomPlot::mouseMove, this, &HeatmapView::onMouseMove);
  connect(plot_, &QCustomPlot::mousePress, this, &HeatmapView::onMousePress);
  connect(plot_, &QCustomPlot::mouseRelease, this, &HeatmapView::onMouseRelease);
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, &HeatmapView::resetZoom);
}

void HeatmapView::setGrid(std::shared_ptr<const MatrixGrid> grid, bool resetView) {
  const bool first = !grid_;
  grid_ = std::move(grid);
  if (resetView || first) resetAxes();
  redraw();
}

void HeatmapView::setHighlight(const std::optional<MatrixWindow>& block) {
  highlight_ = block;
  highlightRect_->setVisible(block.has_value());
  if (block) {
    highlightRect_->topLeft->setCoords(static_cast<double>(block->col_begin) - 0.5,
                                       static_cast<double>(block->row_begin) - 0.5);
    highlightRect_->bottomRight->setCoords(static_cast<double>(block->col_end) - 0.5,
                                           static_cast<double>(block->row_end) - 0.5);
  }
  requestReplot();
}

void HeatmapView::clear() {
  grid_.reset();
  if (!stamp_.isEmpty()) setStamp(QString());  // nothing of what it showed stays in its title
  redraw();
}

CellCounts HeatmapView::overlayCounts() const {
  return grid_ ? grid_->counts : CellCounts{};
}

int64_t HeatmapView::overlayCells(CellClass cls) const {
  if (!grid_) return 0;
  return std::count(grid_->cls.begin(), grid_->cls.end(), cls);
}

void HeatmapView::setStamp(const QString& stamp) {
  stamp_ = stamp;
  plot_->setWindowTitle(stamp.isEmpty() ? name_ : name_ + QStringLiteral("  ·  ") + stamp);
  plot_->setToolTip(plot_->windowTitle());
  elideTitle();
  requestReplot();
}

void HeatmapView::elideTitle() {
  const QString full = plot_->windowTitle().isEmpty() ? name_ : plot_->windowTitle();
  const QString shown = QFontMetrics(title_->font())
                            .elidedText(full, Qt::ElideMiddle, std::max(40, plot_->width() - 16));
  if (shown != title_->text()) title_->setText(shown);
}

void HeatmapView::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  elideTitle();
  fitLegend();
}

void HeatmapView::setColormap(ColormapKind kind) {
  colormapAuto_ = false;
  showColormap(kind);
  redraw();
  emit coloursChanged();
}

void HeatmapView::setAutomaticColormap() {
  colormapAuto_ = true;
  redraw();
  emit coloursChanged();
}

void HeatmapView::showColormap(ColormapKind kind) {
  scale_.map = kind;
  colormapBox_->setCurrentIndex(colormapBox_->findData(static_cast<int>(kind)));
  colorScale_->setGradient(makeGradient(kind));
}

void HeatmapView::showScaleKind(ScaleKind kind) {
  scale_.scale = kind;
  scaleBox_->setCurrentIndex(scaleBox_->findData(static_cast<int>(kind)));
  ticker_->setScale(kind, scale_.linthresh);
}

void HeatmapView::setScaleKind(ScaleKind kind) {
  showScaleKind(kind);
  autoRange_ = true;
  redraw();
  emit coloursChanged();
}

void HeatmapView::setColorRange(double lo, double hi) {
  if (!(hi > lo)) return;
  autoRange_ = false;
  scale_.lo = lo;
  scale_.hi = hi;
  redraw();
  emit coloursChanged();
}

void HeatmapView::setAutoRange() {
  autoRange_ = true;
  redraw();
  emit coloursChanged();
}

HeatmapColours HeatmapView::colours() const {
  HeatmapColours c;
  if (!colormapAuto_) c.colormap = scale_.map;
  c.scale = scale_.scale;
  if (!autoRange_) c.range = std::make_pair(scale_.lo, scale_.hi);
  return c;
}

void HeatmapView::setColours(const HeatmapColours& c) {
  if (c == colours()) return;
  colormapAuto_ = !c.colormap;
  if (c.colormap) showColormap(*c.colormap);
  showScaleKind(c.scale);
  autoRange_ = !c.range || !(c.range->second > c.range->first);
  if (!autoRange_) std::tie(scale_.lo, scale_.hi) = *c.range;
  redraw();
  emit coloursChanged();
}

void HeatmapView::requestReplot() {
  if (isVisible()) {
    plot_->replot(QCustomPlot::rpQueuedReplot);
  } else {
    stale_ = true;  // drawn when shown (showEvent) or replotted by an export (beforeReplot)
  }
}

void HeatmapView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (stale_) {
    fill();
    plot_->replot(QCustomPlot::rpQueuedReplot);
  }
}

void HeatmapView::redraw() {
  unfilled_ = true;
  if (!isVisible()) {
    stale_ = true;
    return;
  }
  fill();
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

void HeatmapView::fill() {
  stale_ = false;
  if (!unfilled_) return;
  unfilled_ = false;
  static const MatrixGrid kEmpty;
  const MatrixGrid& g = grid_ ? *grid_ : kEmpty;
  if (colormapAuto_ && grid_) showColormap(colormapFor(g.value));
  if (autoRange_) std::tie(scale_.lo, scale_.hi) = autoRange(scale_.map, scale_.scale, g.value);
  // No finite value (an all-NaN or all-inf matrix): no colour bar to read, the legend counts.
  colorScale_->setVisible(
      std::any_of(g.value.begin(), g.value.end(), [](float v) { return std::isfinite(v); }));
  image_->setGrid(grid_);
  image_->setColorScale(scale_);
  const ColorLut lut(scale_);
  applyingScale_ = true;
  colorScale_->setDataRange(QCPRange(lut.lo(), lut.hi()));
  applyingScale_ = false;
  // The histogram depends on the values and the scale only: a range or colormap change keeps it.
  const bool sameValues = grid_ && !histGrid_.expired() && histGrid_.lock() == grid_;
  if (!sameValues || histScale_ != scale_.scale || histLinthresh_ != scale_.linthresh) {
    displayValues(g, scale_.scale, scale_.linthresh, &display_);
    histogram_->setValues(display_, scale_.scale, scale_.linthresh);
    histGrid_ = grid_;
    histScale_ = scale_.scale;
    histLinthresh_ = scale_.linthresh;
  }
  histogram_->setRange(scale_.lo, scale_.hi, autoRange_);
  colorScale_->axis()->setLabel(scaleName(scale_.scale));
  beyondRange_ = countBeyondRange(scale_, g.value);
  updateLegend();
}

void HeatmapView::updateLegend() {
  const CellCounts n = overlayCounts();
  const int64_t counts[] = {n.nan, n.pos_inf, n.neg_inf, n.masked};
  for (int k = 0; k < 4; ++k) {
    legendEntries_[k]->setName(QStringLiteral("%1 %2")
                                   .arg(QString::fromLatin1(cell_class_name(kLegendClasses[k])))
                                   .arg(counts[k]));
  }
  beyondEntry_->setName(tr("beyond range %1").arg(beyondRange_));
  fitLegend();
}

void HeatmapView::fitLegend() {
  QCPLegend* legend = plot_->legend;
  int widest = 1, items = 0;
  for (int i = 0; i < legend->elementCount(); ++i) {  // a wrapped grid has empty cells
    if (QCPLayoutElement* item = legend->elementAt(i)) {
      widest = std::max(widest, item->minimumOuterSizeHint().width());
      ++items;
    }
  }
  if (items == 0) return;
  const int room = plot_->width() - 20;  // the legend's margins
  const int perRow = std::clamp(room / (widest + legend->columnSpacing()), 1, items);
  if (perRow == legend->wrap()) return;
  legend->setWrap(perRow);
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, true);
  requestReplot();
}

void HeatmapView::resetAxes() {
  if (!grid_) return;
  applyingRange_ = true;
  plot_->xAxis->setRange(-0.5, static_cast<double>(grid_->total_cols) - 0.5);
  plot_->yAxis->setRange(-0.5, static_cast<double>(grid_->total_rows) - 0.5);
  applyingRange_ = false;
  zoomTimer_->stop();
}

MatrixWindow HeatmapView::visibleWindow() const {
  MatrixWindow w;
  if (!grid_) return w;
  const QCPRange x = plot_->xAxis->range(), y = plot_->yAxis->range();
  w.col_begin = firstElement(x.lower, grid_->total_cols);
  w.col_end = std::max(endElement(x.upper, grid_->total_cols), w.col_begin + 1);
  w.row_begin = firstElement(y.lower, grid_->total_rows);
  w.row_end = std::max(endElement(y.upper, grid_->total_rows), w.row_begin + 1);
  return w;
}

void HeatmapView::zoomTo(const MatrixWindow& w) {
  plot_->xAxis->setRange(static_cast<double>(w.col_begin) - 0.5,
                         static_cast<double>(w.col_end) - 0.5);
  plot_->yAxis->setRange(static_cast<double>(w.row_begin) - 0.5,
                         static_cast<double>(w.row_end) - 0.5);
  requestReplot();
}

QSize HeatmapView::plotPixelSize() const {
  const QRect r = plot_->axisRect()->rect();
  return r.isValid() && r.width() > 8 ? r.size() : QSize(512, 512);
}

bool HeatmapView::exportTo(const QString& path, QString* error) {
  plot_->replot(QCustomPlot::rpImmediateRefresh);
  return exportPlot(plot_, path, error);
}

void HeatmapView::resetZoom() {
  if (!grid_) return;
  resetAxes();
  requestReplot();
  emit viewWindowChanged(visibleWindow());
}

void HeatmapView::onAxisRangeChanged() {
  if (applyingRange_) return;
  clampAxes();
  zoomTimer_->start();
}

void HeatmapView::clampAxes() {
  if (!grid_) return;
  // Each axis stays within the matrix: a range wider than it shows all of it, a range past an
  // edge is moved back inside (its width kept).
  applyingRange_ = true;
  const auto clamp = [](QCPAxis* axis, int64_t elements) {
    const double lo = -0.5, hi = static_cast<double>(elements) - 0.5;
    QCPRange r = axis->range();
    if (r.size() >= hi - lo) {
      r = QCPRange(lo, hi);
    } else if (r.lower < lo) {
      r = QCPRange(lo, lo + r.size());
    } else if (r.upper > hi) {
      r = QCPRange(hi - r.size(), hi);
    }
    if (r != axis->range()) axis->setRange(r);
  };
  clamp(plot_->xAxis, grid_->total_cols);
  clamp(plot_->yAxis, grid_->total_rows);
  applyingRange_ = false;
}

bool HeatmapView::elementAt(const QPoint& pos, int64_t* row, int64_t* col) const {
  if (!grid_ || !plot_->axisRect()->rect().contains(pos)) return false;
  *col = static_cast<int64_t>(std::floor(plot_->xAxis->pixelToCoord(pos.x()) + 0.5));
  *row = static_cast<int64_t>(std::floor(plot_->yAxis->pixelToCoord(pos.y()) + 0.5));
  return grid_->cell_of(*row, *col) >= 0;
}

void HeatmapView::onMouseMove(QMouseEvent* event) {
  int64_t row = 0, col = 0;
  if (elementAt(event->pos(), &row, &col)) hoverCell(row, col);
}

void HeatmapView::onMousePress(QMouseEvent* event) {
  pressPos_ = event->pos();
}

void HeatmapView::onMouseRelease(QMouseEvent* event) {
  int64_t row = 0, col = 0;
  if ((event->pos() - pressPos_).manhattanLength() <= 3 && elementAt(event->pos(), &row, &col)) {
    clickCell(row, col);
  }
}

void HeatmapView::hoverCell(int64_t row, int64_t col) {
  if (!grid_) return;
  const CellReadout r = grid_->readout(row, col);
  if (r.valid()) emit cellHovered(r);
}

void HeatmapView::clickCell(int64_t row, int64_t col) {
  if (!grid_) return;
  const CellReadout r = grid_->readout(row, col);
  if (r.valid()) emit cellClicked(r);
}

}  // namespace attnscope
