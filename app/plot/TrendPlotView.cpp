// Log-scale trend plot over training steps (see TrendPlotView.h).
#include "app/plot/TrendPlotView.h"

#include <qcustomplot.h>

#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>

#include "app/plot/PlotExport.h"

namespace attnscope {

TrendPlotView::TrendPlotView(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot(this);
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  plot_->axisRect()->setRangeZoom(Qt::Horizontal);
  plot_->axisRect()->setRangeDrag(Qt::Horizontal);
  plot_->xAxis->setLabel(tr("training step"));
  plot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  plot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), 8));
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignBottom | Qt::AlignRight);
  plot_->plotLayout()->insertRow(0);
  plot_->plotLayout()->addElement(0, 0, new QCPTextElement(plot_, QString(), 8));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(plot_);
}

void TrendPlotView::clear() {
  setData(QString(), {}, 0, QString(), {});
}

void TrendPlotView::setData(const QString& title, const std::vector<TrendCurve>& curves,
                            double limit, const QString& limitLabel,
                            const std::vector<StepMarker>& markers) {
  plot_->clearGraphs();
  plot_->clearItems();
  markerLabels_.clear();
  curves_ = static_cast<int>(curves.size());
  plot_->legend->setVisible(!curves.empty());  // no empty legend box on a cleared plot
  static_cast<QCPTextElement*>(plot_->plotLayout()->element(0, 0))->setText(title);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  double first = lo, last = -lo;
  for (const TrendCurve& c : curves) {
    QVector<double> x, y;
    for (size_t i = 0; i < c.steps.size() && i < c.values.size(); ++i) {
      const double v = c.values[i];
      const bool shown = std::isfinite(v) && v > 0;
      x << c.steps[i];
      y << (shown ? v : std::numeric_limits<double>::quiet_NaN());
      if (!shown) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
      first = std::min(first, c.steps[i]);
      last = std::max(last, c.steps[i]);
    }
    QCPGraph* g = plot_->addGraph();
    g->setName(c.name);
    if (c.name.isEmpty()) g->removeFromLegend();
    g->setPen(QPen(c.color, 1.4, c.dashed ? Qt::DashLine : Qt::SolidLine));
    if (c.points) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
    g->setData(x, y, true);
  }
  if (limit > 0 && std::isfinite(limit)) {
    hi = std::max(hi, limit);
    lo = std::min(lo, limit);
    auto* line = new QCPItemStraightLine(plot_);
    line->setPen(QPen(QColor(0xd0, 0x20, 0x20), 1.2, Qt::DashLine));
    line->point1->setCoords(0, limit);
    line->point2->setCoords(1, limit);
    auto* label = new QCPItemText(plot_);
    label->setText(limitLabel);
    label->setColor(QColor(0xd0, 0x20, 0x20));
    label->setFont(QFont(font().family(), 8));
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);  // below the line
    label->position->setCoords(std::isfinite(first) ? first : 0, limit);
  }
  for (const StepMarker& m : markers) {
    first = std::min(first, m.step);
    last = std::max(last, m.step);
    auto* line = new QCPItemStraightLine(plot_);
    line->setPen(QPen(m.color, 1.2, Qt::DotLine));
    line->point1->setCoords(m.step, 1);
    line->point2->setCoords(m.step, 2);
    auto* label = new QCPItemText(plot_);
    label->setText(m.label);
    label->setColor(m.color);
    label->setFont(QFont(font().family(), 8));
    label->setRotation(-90);
    label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(m.step, 0.02);
    markerLabels_ << m.label;
  }
  if (!(lo <= hi)) lo = 1, hi = 10;
  plot_->yAxis->setRange(lo / 2, hi * 2);
  if (!(first <= last)) first = 0, last = 1;
  const double pad = 0.03 * std::max(last - first, 1.0);
  plot_->xAxis->setRange(first - pad, last + pad);
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

bool TrendPlotView::exportTo(const QString& path, QString* error) {
  plot_->replot(QCustomPlot::rpImmediateRefresh);
  return exportPlot(plot_, path, error);
}

}  // namespace attnscope
