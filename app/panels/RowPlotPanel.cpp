// Row series of the current result with their thresholds (see RowPlotPanel.h).
#include "app/panels/RowPlotPanel.h"

#include <QComboBox>
#include <QDockWidget>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "app/gui/HeadRowSeries.h"
#include "app/gui/SessionContext.h"
#include "app/plot/RowPlotView.h"

namespace attnscope {
namespace {

// The series' name in the choice box and the plot title.
QString label(RowSeriesKind series) {
  switch (series) {
    case RowSeriesKind::m_lse:
      return RowPlotPanel::tr("row max m and LSE");
    case RowSeriesKind::l:
      return RowPlotPanel::tr("softmax denominator l");
    case RowSeriesKind::o_norm:
      return RowPlotPanel::tr("||O_i||");
    case RowSeriesKind::dq_norm:
      return RowPlotPanel::tr("||dQ_i||");
  }
  return {};
}

}  // namespace

RowPlotPanel::RowPlotPanel(SessionContext* context, QWidget* parent)
    : QWidget(parent), context_(context) {
  choice_ = new QComboBox(this);
  choice_->setObjectName(QStringLiteral("rowSeriesBox"));
  for (const Series s : allSeries()) choice_->addItem(label(s), static_cast<int>(s));
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

void RowPlotPanel::reveal(Series series) {
  showSeries(series);
  if (auto* dock = qobject_cast<QDockWidget*>(parentWidget())) {
    dock->show();
    dock->raise();
  }
}

QString RowPlotPanel::viewName() const {
  return viewName(series_);
}

QString RowPlotPanel::viewName(Series series) {
  switch (series) {
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

std::vector<RowPlotPanel::Series> RowPlotPanel::allSeries() {
  return {Series::m_lse, Series::l, Series::o_norm, Series::dq_norm};
}

QString RowPlotPanel::title(const HeadResult& r, Series series) {
  return tr("%1 · b%2 h%3 · %4 %5")
      .arg(label(series))
      .arg(r.request.batch)
      .arg(r.request.head)
      .arg(QString::fromLatin1(precision_name(r.precision)), modeName(r.request.mode));
}

std::optional<RowPlotPanel::Series> RowPlotPanel::seriesOfView(const QString& view) {
  for (const Series s : allSeries()) {
    if (viewName(s) == view) return s;
  }
  return std::nullopt;
}

void RowPlotPanel::redraw() {
  const std::shared_ptr<const HeadResult> r = context_->result();
  if (!r) {
    plot_->clear();
    return;
  }
  const HeadRowSeries rows = head_row_series(*r, series_);
  plot_->setData(title(*r, series_), rows.series, rows.thresholds);
}

}  // namespace attnscope
