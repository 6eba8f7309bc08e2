// Scale sweep plots (see SweepPanel.h).
#include "app/panels/SweepPanel.h"

#include <QLabel>
#include <QVBoxLayout>

#include "app/export/SettingNames.h"
#include "app/gui/AnalysisController.h"
#include "app/gui/SessionContext.h"
#include "app/plot/RowPlotView.h"

namespace attnscope {
namespace {

QColor precisionColor(Precision p) {
  switch (p) {
    case Precision::f16:
      return QColor(0xd6, 0x27, 0x28);
    case Precision::bf16:
      return QColor(0x2c, 0xa0, 0x2c);
    default:
      break;
  }
  return QColor(0x1f, 0x77, 0xb4);
}

}  // namespace

SweepPanel::SweepPanel(SessionContext* context, AnalysisController* analysis, QWidget* parent)
    : QWidget(parent), context_(context), analysis_(analysis) {
  ranges_ = new QLabel(tr("the sweep runs while this panel is visible"), this);
  ranges_->setObjectName(QStringLiteral("sweepRanges"));
  ranges_->setWordWrap(true);
  ranges_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  nonfinite_ = new RowPlotView(this);
  maxScore_ = new RowPlotView(this);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(ranges_);
  layout->addWidget(nonfinite_, 1);
  layout->addWidget(maxScore_, 1);
  connect(analysis_, &AnalysisController::sweepChanged, this, &SweepPanel::showSweep);
}

QString SweepPanel::rangesText() const {
  return ranges_->text();
}

void SweepPanel::showSweep() {
  const auto sweep = analysis_->sweep();
  if (!sweep) return;
  std::vector<Precision> precisions;
  for (const SafeRange& r : sweep->ranges) precisions.push_back(r.precision);
  std::vector<RowSeries> counts, maxima;
  for (Precision p : precisions) {
    RowSeries c{QString::fromLatin1(precision_name(p)), {}, precisionColor(p)};
    RowSeries m = c;
    for (const SweepPoint& pt : sweep->points) {
      if (pt.precision != p) continue;
      c.values.push_back(static_cast<float>(pt.nonfinite_o + pt.nonfinite_lse + pt.nonfinite_grad));
      m.values.push_back(static_cast<float>(pt.max_abs_s));
    }
    counts.push_back(std::move(c));
    maxima.push_back(std::move(m));
  }
  nonfinite_->setXAxis(tr("softmax scale"), sweep->scales, true);
  maxScore_->setXAxis(tr("softmax scale"), sweep->scales, true);
  nonfinite_->setData(tr("non-finite O, LSE and gradients vs scale"), counts, {});
  maxScore_->setData(tr("max |S| vs scale"), maxima,
                     {{tr("fp16 max 65504"), 65504.0, QColor(0xc0, 0x20, 0x20)}});
  QStringList lines;
  for (const SafeRange& r : sweep->ranges) {
    QString line = QStringLiteral("%1 %2: ").arg(QString::fromLatin1(precision_name(r.precision)),
                                                 modeName(r.mode));
    line += r.any_finite
                ? tr("finite for scales %1 .. %2").arg(r.low, 0, 'g', 4).arg(r.high, 0, 'g', 4)
                : tr("never finite");
    if (r.threshold) line += tr(", non-finite from %1").arg(*r.threshold, 0, 'g', 5);
    line += r.case_scale_finite ? tr(" (case scale finite)") : tr(" (case scale NOT finite)");
    lines << line;
  }
  ranges_->setText(tr("case scale %1\n").arg(sweep->case_scale, 0, 'g', 6) + lines.join('\n'));
}

}  // namespace attnscope
