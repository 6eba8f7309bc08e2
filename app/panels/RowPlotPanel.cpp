// Row series of the current result with their thresholds (see RowPlotPanel.h).
#include "app/panels/RowPlotPanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "app/export/HeadRowSeries.h"
#include "app/gui/SessionContext.h"
#include "app/panels/PanelReveal.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/RowPlotView.h"

namespace attnscope {
RowPlotPanel::RowPlotPanel(SessionContext* context, QWidget* parent)
    : QWidget(parent), context_(context) {
  choice_ = new QComboBox(this);
  choice_->setObjectName(QStringLiteral("rowSeriesBox"));
  for (const Series s : allRowSeries()) choice_->addItem(rowSeriesLabel(s), static_cast<int>(s));
  plot_ = new RowPlotView(this);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("series"), this));
  top->addWidget(choice_);
  top->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(top);
  layout->addWidget(plot_, 1);
  connect(choice_, &QComboBox::activated, this,
          [this](int index) { showSeries(static_cast<Series>(choice_->itemData(index).toInt())); });
  connect(context_, &SessionContext::resultChanged, this, &RowPlotPanel::redraw);
  connect(context_, &SessionContext::rowSeriesRequested, this, &RowPlotPanel::reveal);

  AnnotationBoard* board = context_->annotations();
  AnnotationLayer* layer = AnnotationLayer::of(plot_);
  connect(layer, &AnnotationLayer::placed, this,
          [this, board](const Annotation& a) { board->place(viewName(), a); });
  connect(layer, &AnnotationLayer::moved, board, &AnnotationBoard::replace);
  connect(layer, &AnnotationLayer::editRequested, board, &AnnotationBoard::editText);
  connect(board, &AnnotationBoard::changed, this, &RowPlotPanel::showAnnotations);
  connect(board, &AnnotationBoard::toolChanged, this, &RowPlotPanel::showAnnotations);
}

void RowPlotPanel::showAnnotations() {
  AnnotationLayer* layer = AnnotationLayer::of(plot_);
  layer->setTool(context_->annotations()->tool());
  layer->setAnnotations(context_->annotations()->drawn(viewName()));
}

void RowPlotPanel::showSeries(Series series) {
  series_ = series;
  choice_->setCurrentIndex(choice_->findData(static_cast<int>(series)));
  redraw();
  showAnnotations();
}

void RowPlotPanel::reveal(Series series) {
  showSeries(series);
  revealPanel(this);
}

QString RowPlotPanel::viewName() const {
  return rowSeriesView(series_);
}

void RowPlotPanel::redraw() {
  const std::shared_ptr<const HeadResult> r = context_->result();
  if (!r) {
    plot_->clear();
    return;
  }
  // A forward's result has no ||dQ_i|| yet, the statistics' no ||O_i||: the plot keeps the last
  // one until the result that has it.
  if (!r->gradients && series_ == Series::dq_norm) return;
  if (!r->outputs && series_ == Series::o_norm) return;
  const HeadRowSeries rows = head_row_series(*r, series_);
  plot_->setData(rowSeriesTitle(*r, series_), rows.series, rows.thresholds);
}

}  // namespace attnscope
