// Row series of the current result with their thresholds (see RowPlotPanel.h).
#include "app/panels/RowPlotPanel.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "app/gui/SessionContext.h"
#include "app/plot/RowPlotView.h"

namespace attnscope {
namespace {

// exp(x) underflows fp32 below log(FLT_MIN) ~ -87.3 and overflows above 88.72; -88.7 is the
// line DESIGN §4 uses for an LSE that breaks a recomputation.
constexpr double kExpLimit = -88.7;

const QColor kThresholdRed(0xc0, 0x20, 0x20);
const QColor kThresholdGrey(0x60, 0x60, 0x60);

}  // namespace

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
}

void RowPlotPanel::redraw() {
  const std::shared_ptr<const HeadResult> r = context_->result();
  if (!r) {
    plot_->clear();
    return;
  }
  std::vector<RowSeries> series;
  std::vector<Threshold> thresholds;
  const bool fp16 = r->precision == Precision::f16;
  const Threshold fp16Max{tr("fp16 max 65504"), 65504.0, kThresholdRed};
  switch (series_) {
    case Series::m_lse:
      series.push_back({tr("m (row max)"), r->m, QColor(0x1f, 0x77, 0xb4)});
      series.push_back({tr("LSE"), r->lse, QColor(0xd6, 0x27, 0x28)});
      thresholds.push_back({tr("-88.7 (exp range of fp32)"), kExpLimit, kThresholdGrey});
      if (fp16) {
        thresholds.push_back(fp16Max);
        thresholds.push_back({tr("-65504"), -65504.0, kThresholdRed});
      }
      break;
    case Series::l:
      series.push_back({tr("l"), r->l, QColor(0x2c, 0xa0, 0x2c)});
      break;
    case Series::o_norm:
      series.push_back({tr("||O_i||"), r->o_norm, QColor(0x94, 0x67, 0xbd)});
      if (fp16) thresholds.push_back(fp16Max);
      break;
    case Series::dq_norm:
      series.push_back({tr("||dQ_i||"), r->dq_norm, QColor(0x8c, 0x56, 0x4b)});
      if (fp16) thresholds.push_back(fp16Max);
      break;
  }
  const QString title =
      tr("%1 · b%2 h%3 · %4 %5")
          .arg(choice_->currentText())
          .arg(r->request.batch)
          .arg(r->request.head)
          .arg(QString::fromLatin1(precision_name(r->precision)), modeName(r->request.mode));
  plot_->setData(title, series, thresholds);
}

}  // namespace attnscope
