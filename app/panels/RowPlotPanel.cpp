// Row series of the current result with their thresholds (see RowPlotPanel.h).
#include "app/panels/RowPlotPanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "app/gui/HeadRowSeries.h"
#include "app/gui/SessionContext.h"
#include "app/plot/RowPlotView.h"

namespace attnscope {

RowPlotPanel::RowPlotPanel(SessionContext* context, QWidget* parent)
    : QWidget(parent), context_(context) {
  choice_ = new QComboBox(this);
  choice_->setObjectName(QStringLiteral("rowSeriesBox"));
  choice_->addItem(tr("row max m and LSE"), static_cast<int>(Series::m_lse));
  choice_->addItem(tr("softmax denominator l"), static_cast<int>(Series::l));
  choice_->addItem(tr("||O_i||"), static_cast<int>(Series::o_norm));
  choice_->addItem(tr("||dQ_i||"), static_cast<int>(Series::dq_norm));
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
}

void RowPlotPanel::showSeries(Series series) {
  series_ = series;
  choice_->setCurrentIndex(choice_->findData(static_cast<int>(series)));
  redraw();
  emit seriesChanged();
}

QString RowPlotPanel::viewName() const {
  switch (series_) {
    case Series::m_lse:
      return QStringLiteral("row m, LSE");
    case Series::l:
      return QStringLiteral("row l");
    case Series::o_norm:
      return QStringLiteral("row ||O_i||");
    case Series::dq_norm:
      return QStringLiteral("row ||dQ_i||");
  }
  return {};
}

void RowPlotPanel::redraw() {
  const std::shared_ptr<const HeadResult> r = context_->result();
  if (!r) {
    plot_->clear();
    return;
  }
  const HeadRowSeries rows = head_row_series(*r, series_);
  const QString title =
      tr("%1 · b%2 h%3 · %4 %5")
          .arg(choice_->currentText())
          .arg(r->request.batch)
          .arg(r->request.head)
          .arg(QString::fromLatin1(precision_name(r->precision)), modeName(r->request.mode));
  plot_->setData(title, rows.series, rows.thresholds);
}

}  // namespace attnscope
