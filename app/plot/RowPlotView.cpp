// Row-series plot with threshold lines and non-finite markers (see RowPlotView.h).
#include "app/plot/RowPlotView.h"

#include <qcustomplot.h>

#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>

#include "app/plot/Colormaps.h"
#include "app/plot/IndexTicker.h"
#include "app/plot/PlotExport.h"

namespace attnscope {
namespace {

// A threshold is drawn when it lies within this many data spans of the finite data, so that
// -88.7 shows next to an LSE of -60 but does not flatten an LSE between 2 and 6.
constexpr double kThresholdReach = 1.0;

}  // namespace

RowPlotView::RowPlotView(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot(this);
  plot_->setMouseTracking(true);
  // Thick antialiased polylines over thousands of rows are slow to stroke: fast joins instead.
  plot_->setPlottingHint(QCP::phFastPolylines, true);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeZoom(Qt::Horizontal);
  plot_->axisRect()->setRangeDrag(Qt::Horizontal);
  plot_->xAxis->setLabel(tr("query row i"));
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), 8));
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0, new QCPTextElement(plot_, QString(), 8));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
  connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* event) {
    if (series_.empty() || !plot_->axisRect()->rect().contains(event->pos())) return;
    const double x = plot_->xAxis->pixelToCoord(event->pos().x());
    const auto row = static_cast<int64_t>(std::floor(x + 0.5));
    if (row >= 0 && row < static_cast<int64_t>(series_.front().values.size())) {
      emit rowHovered(row);
    }
  });
}

void RowPlotView::setXAxis(const QString& label, const std::vector<double>& positions,
                           bool logScale) {
  plot_->xAxis->setLabel(label);
  xPositions_ = positions;
  plot_->xAxis->setScaleType(logScale ? QCPAxis::stLogarithmic : QCPAxis::stLinear);
  if (logScale) {
    plot_->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  } else {
    plot_->xAxis->setTicker(indexTicker());  // row or step indices
  }
}

void RowPlotView::clear() {
  setData(QString(), {}, {});
}

void RowPlotView::setData(const QString& title, const std::vector<RowSeries>& series,
                          const std::vector<Threshold>& thresholds) {
  series_ = series;
  drawn_.clear();
  nonfinite_ = 0;
  plot_->clearGraphs();
  for (QCPAbstractItem* item : thresholdItems_) plot_->removeItem(item);
  thresholdItems_.clear();
  static_cast<QCPTextElement*>(plot_->plotLayout()->element(0, 0))->setText(title);

  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  int64_t rows = 0;
  for (const RowSeries& s : series) {
    for (float v : s.values) {
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, static_cast<double>(v));
      hi = std::max(hi, static_cast<double>(v));
    }
    rows = std::max<int64_t>(rows, static_cast<int64_t>(s.values.size()));
  }
  if (lo > hi) lo = 0, hi = 1;
  const double span = std::max(hi - lo, std::max(1e-6, 0.05 * std::fabs(hi)));
  for (const Threshold& t : thresholds) {
    if (t.value < lo - kThresholdReach * span || t.value > hi + kThresholdReach * span) continue;
    lo = std::min(lo, t.value);
    hi = std::max(hi, t.value);
    auto* line = new QCPItemStraightLine(plot_);
    line->setPen(QPen(t.color, 1.2, Qt::DashLine));
    line->point1->setCoords(0, t.value);
    line->point2->setCoords(1, t.value);
    auto* label = new QCPItemText(plot_);
    label->setText(t.label);
    label->setColor(t.color);
    label->setFont(QFont(font().family(), 8));
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->position->setCoords(0, t.value);
    drawn_ << t.label;
    thresholdItems_ << line << label;
  }
  const double pad = 0.06 * std::max(hi - lo, 1e-6);

  const auto xAt = [this](int i) {
    return static_cast<size_t>(i) < xPositions_.size() ? xPositions_[static_cast<size_t>(i)]
                                                       : static_cast<double>(i);
  };
  std::vector<double> markerRows;
  for (const RowSeries& s : series) {
    QVector<double> x(static_cast<int>(s.values.size())), y(x.size());
    for (int i = 0; i < x.size(); ++i) {
      const float v = s.values[static_cast<size_t>(i)];
      x[i] = xAt(i);
      y[i] = std::isfinite(v) ? v : std::numeric_limits<double>::quiet_NaN();
      if (!std::isfinite(v)) markerRows.push_back(x[i]);
    }
    QCPGraph* g = plot_->addGraph();
    g->setName(s.name);
    g->setPen(QPen(s.color, 1.4));
    if (!xPositions_.empty()) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
    g->setData(x, y, true);
  }
  if (!markerRows.empty()) {
    nonfinite_ = static_cast<int64_t>(markerRows.size());
    QCPGraph* g = plot_->addGraph();
    const QColor c = overlayColor(CellClass::nan);
    g->setName(tr("non-finite (%1)").arg(nonfinite_));
    g->setLineStyle(QCPGraph::lsNone);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssTriangle, c, c, 7));
    QVector<double> x(markerRows.begin(), markerRows.end());
    g->setData(x, QVector<double>(x.size(), lo - pad / 2));
  }
  if (xPositions_.empty() || rows == 0) {
    plot_->xAxis->setRange(-0.5, std::max<double>(1, static_cast<double>(rows)) - 0.5);
  } else {
    const double x0 = xAt(0), x1 = xAt(static_cast<int>(rows) - 1);
    const bool log = plot_->xAxis->scaleType() == QCPAxis::stLogarithmic;
    plot_->xAxis->setRange(log ? x0 / 1.2 : x0 - 0.5, log ? x1 * 1.2 : x1 + 0.5);
  }
  plot_->yAxis->setRange(lo - pad, hi + pad);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

bool RowPlotView::exportTo(const QString& path, QString* error) {
  plot_->replot(QCustomPlot::rpImmediateRefresh);
  return exportPlot(plot_, path, error);
}

}  // namespace attnscope
