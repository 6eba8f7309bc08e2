// Histogram + range entries of a heatmap's colour scale (see RangeHistogram.h).
#include "app/plot/RangeHistogram.h"

#include <QCheckBox>
#include <QDoubleValidator>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "app/plot/HeatmapLayers.h"

namespace attnscope {
namespace {

constexpr int kBins = 64;

QLineEdit* numberEdit(QWidget* parent) {
  auto* edit = new QLineEdit(parent);
  edit->setValidator(new QDoubleValidator(edit));
  edit->setMaximumWidth(110);
  return edit;
}

}  // namespace

RangeHistogram::RangeHistogram(QWidget* parent) : QWidget(parent) {
  plot_ = new QCustomPlot(this);
  plot_->setMinimumHeight(60);
  plot_->setMaximumHeight(80);
  plot_->yAxis->setVisible(false);
  plot_->axisRect()->setAutoMargins(QCP::msBottom);
  plot_->axisRect()->setMargins(QMargins(6, 2, 6, 0));
  plot_->xAxis->setTickLabelFont(QFont(font().family(), 7));
  ticker_ = QSharedPointer<ScaleTicker>(new ScaleTicker);
  ticker_->setTickCount(5);
  plot_->xAxis->setTicker(ticker_);
  bars_ = new QCPBars(plot_->xAxis, plot_->yAxis);
  bars_->setPen(Qt::NoPen);
  bars_->setBrush(QColor(0x55, 0x6b, 0x8d));
  bars_->setWidthType(QCPBars::wtPlotCoords);
  for (QCPItemStraightLine** line : {&loLine_, &hiLine_}) {
    *line = new QCPItemStraightLine(plot_);
    (*line)->setPen(QPen(QColor(0xd0, 0x30, 0x30), 1.5));
  }

  loEdit_ = numberEdit(this);
  hiEdit_ = numberEdit(this);
  loEdit_->setToolTip(tr("Lower end of the colour scale (data units)"));
  hiEdit_->setToolTip(tr("Upper end of the colour scale (data units)"));
  auto_ = new QCheckBox(tr("auto"), this);
  auto_->setChecked(true);
  auto_->setToolTip(
      tr("Fit the colour scale to the finite values shown; untick to keep the current range"));

  auto* row = new QHBoxLayout;
  row->addWidget(new QLabel(tr("range"), this));
  row->addWidget(loEdit_);
  row->addWidget(new QLabel(QStringLiteral("…"), this));
  row->addWidget(hiEdit_);
  row->addWidget(auto_);
  row->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(plot_);
  layout->addLayout(row);

  connect(loEdit_, &QLineEdit::editingFinished, this, &RangeHistogram::commitEdits);
  connect(hiEdit_, &QLineEdit::editingFinished, this, &RangeHistogram::commitEdits);
  connect(auto_, &QCheckBox::toggled, this, &RangeHistogram::automaticToggled);
}

bool RangeHistogram::automatic() const {
  return auto_->isChecked();
}

void RangeHistogram::setValues(const std::vector<double>& display, ScaleKind scale,
                               double linthresh) {
  scale_ = scale;
  linthresh_ = linthresh;
  ticker_->setScale(scale, linthresh);
  counts_.assign(kBins, 0.0);
  double a = 0, b = 1;
  if (!display.empty()) {
    const auto [mn, mx] = std::minmax_element(display.begin(), display.end());
    a = *mn;
    b = *mx > *mn ? *mx : *mn + 1;
  }
  const double width = (b - a) / kBins;
  const double perBin = kBins / (b - a);
  int64_t bins[kBins] = {};
  for (double t : display) {
    const int bin = static_cast<int>((t - a) * perBin);  // >= 0: t >= a
    ++bins[bin < kBins ? bin : kBins - 1];
  }
  for (int i = 0; i < kBins; ++i) counts_[static_cast<size_t>(i)] = static_cast<double>(bins[i]);
  QVector<double> keys(kBins), heights(kBins);
  double top = 1;
  for (int i = 0; i < kBins; ++i) {
    keys[i] = a + (i + 0.5) * width;
    // log(1 + n) keeps a single outlier bin from flattening the rest.
    heights[i] = std::log1p(counts_[static_cast<size_t>(i)]);
    top = std::max(top, heights[i]);
  }
  bars_->setWidth(width);
  bars_->setData(keys, heights, true);
  plot_->xAxis->setRange(a - width, b + width);
  plot_->yAxis->setRange(0, top * 1.05);
  placeLines();
}

void RangeHistogram::setRange(double lo, double hi, bool automatic) {
  lo_ = lo;
  hi_ = hi;
  loEdit_->setText(formatNumber(lo, 6));
  hiEdit_->setText(formatNumber(hi, 6));
  const QSignalBlocker block(auto_);
  auto_->setChecked(automatic);
  placeLines();
}

void RangeHistogram::commitEdits() {
  bool okLo = false, okHi = false;
  const double lo = loEdit_->text().toDouble(&okLo);
  const double hi = hiEdit_->text().toDouble(&okHi);
  if (!okLo || !okHi || !(hi > lo) || (lo == lo_ && hi == hi_)) return;
  lo_ = lo;
  hi_ = hi;
  {
    const QSignalBlocker block(auto_);
    auto_->setChecked(false);
  }
  placeLines();
  emit rangeEdited(lo, hi);
}

void RangeHistogram::placeLines() {
  const double x[] = {toDisplay(scale_, lo_, linthresh_), toDisplay(scale_, hi_, linthresh_)};
  QCPItemStraightLine* lines[] = {loLine_, hiLine_};
  for (int i = 0; i < 2; ++i) {
    lines[i]->setVisible(std::isfinite(x[i]));
    lines[i]->point1->setCoords(x[i], 0);
    lines[i]->point2->setCoords(x[i], 1);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace attnscope
