// What-if banner (see WhatIfBanner.h).
#include "app/panels/WhatIfBanner.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>

#include "app/gui/AnalysisController.h"
#include "app/gui/SessionContext.h"

namespace attnscope {

WhatIfBanner::WhatIfBanner(SessionContext* context, AnalysisController* analysis, QWidget* parent)
    : QFrame(parent), context_(context), analysis_(analysis) {
  setObjectName(QStringLiteral("whatIfBanner"));
  setFrameShape(QFrame::StyledPanel);
  setAutoFillBackground(true);
  QPalette tint = palette();
  tint.setColor(QPalette::Window, QColor(0xff, 0xf3, 0xc8));
  setPalette(tint);
  label_ = new QLabel(this);
  label_->setWordWrap(true);
  label_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // wraps, never widens
  reset_ = new QPushButton(tr("Reset to recorded"), this);
  reset_->setObjectName(QStringLiteral("resetToRecordedButton"));
  reset_->setToolTip(
      tr("Replay the recorded run: scale, precision, mode, mask fill, backend "
         "and clip as the dump says"));
  keep_ = new QCheckBox(tr("Keep for this dump"), this);
  keep_->setObjectName(QStringLiteral("keepWhatIfsBox"));
  keep_->setToolTip(
      tr("Save these settings in the dump's session file, so that they come "
         "back when it is opened again"));
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(6, 2, 6, 2);
  row->addWidget(label_, 1);
  row->addWidget(keep_);
  row->addWidget(reset_);
  connect(reset_, &QPushButton::clicked, context_, &SessionContext::resetToRecorded);
  connect(keep_, &QCheckBox::toggled, context_, &SessionContext::setWhatIfsKept);
  connect(context_, &SessionContext::settingsChanged, this, &WhatIfBanner::refresh);
  connect(context_, &SessionContext::caseChanged, this, &WhatIfBanner::refresh);
  connect(analysis_, &AnalysisController::summaryChanged, this, &WhatIfBanner::refresh);
  refresh();
}

QString WhatIfBanner::text() const {
  return label_->text();
}

void WhatIfBanner::refresh() {
  const QStringList differences = context_->whatIfs();
  setVisible(!differences.isEmpty());
  // The words the findings header and `attnscope-cli scan` use: resolve()'s what-ifs.
  const std::optional<ResolvedRun> run = context_->resolved();
  QString text = tr("What-if: %1.").arg(differences.join(QStringLiteral(" · ")));
  if (run && run->runs_differ()) {
    text += tr(" The kernels and the findings run these settings, not the recorded run.");
  }
  if (run && !run->backend.empty()) {
    text +=
        tr(" The backend computes the heatmaps' O and gradients; the findings replay "
           "attnscope's kernels.");
  }
  // The hypothesis test, in the words of `scan`'s table: "the what-if reproduces the recorded o".
  const auto summary = analysis_->summary();
  if (analysis_->summaryCurrent() && summary && !summary->what_if_explains.empty()) {
    const QString explains = QString::fromStdString(summary->what_if_explains);
    text += QLatin1Char(' ') + explains.left(1).toUpper() + explains.mid(1) + QLatin1Char('.');
  }
  label_->setText(text);
  label_->setToolTip(label_->text());
  const QSignalBlocker block(keep_);
  keep_->setChecked(context_->whatIfsKept());
}

}  // namespace attnscope
