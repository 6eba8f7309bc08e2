// Findings list bound to the AnalysisController's case summary (see FindingsPanel.h).
#include "app/panels/FindingsPanel.h"

#include <QHeaderView>
#include <QLabel>
#include <QMenu>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>

#include "app/export/SettingNames.h"
#include "app/gui/AnalysisController.h"
#include "app/gui/ReproDialog.h"
#include "app/gui/SessionContext.h"
#include "app/panels/SeverityStyle.h"
#include "core/analysis/shrink.h"  // reproducible_kind

namespace attnscope {
namespace {

constexpr int kIndexRole = Qt::UserRole;

QString rangeText(const IndexRange& r) {
  if (!r.valid()) return QStringLiteral("all");
  return r.first == r.last ? QString::number(r.first)
                           : QStringLiteral("%1-%2").arg(r.first).arg(r.last);
}

QString whereText(const Finding& f) {
  QStringList parts;
  if (f.batch >= 0) parts << QStringLiteral("b%1").arg(f.batch);
  if (f.head >= 0) {
    parts << QStringLiteral("h%1").arg(f.head);
  } else if (f.heads.valid()) {
    parts << QStringLiteral("h%1").arg(rangeText(f.heads));
  }
  if (f.rows.valid()) parts << QStringLiteral("rows %1").arg(rangeText(f.rows));
  if (f.cols.valid()) parts << QStringLiteral("cols %1").arg(rangeText(f.cols));
  return parts.join(QLatin1Char(' '));
}

// " · case clip: total norm T, coef C"; per kv head the range of the coefficients.
QString clipText(const CaseSummary& s) {
  if (s.clips.empty()) return {};
  if (s.clips.size() == 1) {
    return FindingsPanel::tr(" · case clip: total norm %1, coef %2")
        .arg(s.clips.front().total_norm, 0, 'g', 6)
        .arg(s.clips.front().coef, 0, 'g', 6);
  }
  const auto [lo, hi] =
      std::minmax_element(s.clips.begin(), s.clips.end(),
                          [](const ClipResult& a, const ClipResult& b) { return a.coef < b.coef; });
  return FindingsPanel::tr(" · clip per kv head: %1 calls, coef %2 to %3")
      .arg(s.clips.size())
      .arg(lo->coef, 0, 'g', 6)
      .arg(hi->coef, 0, 'g', 6);
}

}  // namespace

FindingsPanel::FindingsPanel(SessionContext* context, AnalysisController* analysis, QWidget* parent)
    : QWidget(parent), context_(context), analysis_(analysis) {
  header_ = new QLabel(this);
  header_->setObjectName(QStringLiteral("findingsHeader"));
  header_->setWordWrap(true);
  list_ = new QTreeWidget(this);
  list_->setObjectName(QStringLiteral("findingsList"));
  list_->setHeaderLabels(
      {tr("severity"), tr("kind"), tr("tensor"), tr("where"), tr("count"), tr("message")});
  list_->setRootIsDecorated(false);
  list_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  list_->setWordWrap(true);
  repro_ = new QPushButton(tr("Make reproducer…"), this);
  repro_->setObjectName(QStringLiteral("makeReproducer"));
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(header_);
  layout->addWidget(repro_, 0, Qt::AlignLeft);  // above the list: a short dock keeps it in view
  layout->addWidget(list_, 1);
  connect(repro_, &QPushButton::clicked, this, [this] { makeReproducer(); });
  connect(list_, &QTreeWidget::currentItemChanged, this, &FindingsPanel::updateReproButton);
  list_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(list_, &QTreeWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QTreeWidgetItem* item = list_->itemAt(at);
    if (item == nullptr) return;
    list_->setCurrentItem(item);
    QMenu menu(this);
    QAction* make = menu.addAction(repro_->text(), this, [this] { makeReproducer(); });
    make->setEnabled(repro_->isEnabled());
    make->setToolTip(repro_->toolTip());
    menu.exec(list_->viewport()->mapToGlobal(at));
  });
  connect(list_, &QTreeWidget::itemClicked, this,
          [this](QTreeWidgetItem* item) { onActivated(item); });
  connect(list_, &QTreeWidget::itemActivated, this,
          [this](QTreeWidgetItem* item) { onActivated(item); });
  connect(analysis_, &AnalysisController::summaryChanged, this, &FindingsPanel::showSummary);
  // From a case or settings change until the new summary is in, the list shows nothing of the
  // one it replaces.
  connect(context_, &SessionContext::inputsChanged, this, &FindingsPanel::showSummary);
  showSummary();
}

int FindingsPanel::findingCount() const {
  return list_->topLevelItemCount();
}

int FindingsPanel::rowOfKind(const QString& kind) const {
  for (int i = 0; i < list_->topLevelItemCount(); ++i) {
    if (list_->topLevelItem(i)->text(1) == kind) return i;
  }
  return -1;
}

void FindingsPanel::selectRow(int row) {
  if (QTreeWidgetItem* item = list_->topLevelItem(row)) {
    list_->setCurrentItem(item);
    list_->scrollToItem(item);
  }
}

void FindingsPanel::activate(int row) {
  QTreeWidgetItem* item = list_->topLevelItem(row);
  if (item == nullptr) return;
  list_->setCurrentItem(item);
  onActivated(item);
}

const Finding* FindingsPanel::currentFinding() const {
  const auto s = analysis_->summary();
  QTreeWidgetItem* item = list_->currentItem();
  if (item == nullptr) item = list_->topLevelItem(0);  // the worst finding
  if (!s || item == nullptr) return nullptr;
  return &s->findings[static_cast<size_t>(item->data(0, kIndexRole).toInt())];
}

void FindingsPanel::updateReproButton() {
  const Finding* f = currentFinding();
  QString why;
  if (f == nullptr) {
    why = tr("select a finding first");
  } else if (f->what_if) {
    why = tr("a reproducer starts from the recorded run: reset the what-if settings");
  } else if (!reproducible_kind(f->kind)) {
    why = tr("%1 is about the run's inputs or what the dump lacks, not a kernel")
              .arg(QString::fromLatin1(finding_kind_name(f->kind)));
  }
  repro_->setEnabled(why.isEmpty());
  repro_->setToolTip(why.isEmpty() ? tr("Shrink the case to the smallest part that shows %1 "
                                        "and write an upstream bug report's bundle")
                                         .arg(QString::fromLatin1(finding_kind_name(f->kind)))
                                   : why);
}

ReproDialog* FindingsPanel::makeReproducer() {
  updateReproButton();
  const Finding* f = currentFinding();
  if (!repro_->isEnabled() || f == nullptr || context_->fileIndex() < 0) return nullptr;
  const QString finding = QString::fromLatin1(finding_kind_name(f->kind)) + QLatin1Char(':') +
                          QString::fromStdString(f->tensor);
  auto* dialog = new ReproDialog(context_->file(context_->fileIndex()).path, context_->casePath(),
                                 finding, window());
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  dialog->show();
  return dialog;
}

void FindingsPanel::showSummary() {
  list_->clear();
  updateReproButton();
  const auto s = analysis_->summary();
  if (!s || !analysis_->summaryCurrent()) {
    header_->setText(context_->caseInfo() ? tr("analysing…") : tr("no case selected"));
    return;
  }
  QString text = tr("%n finding(s)", nullptr, static_cast<int>(s->findings.size())) +
                 tr(" · %1 %2 · %3 error(s)")
                     .arg(QString::fromLatin1(precision_name(s->precision)),
                          s->upcast ? tr("upcast") : modeName(s->mode))
                     .arg(count_severity(s->findings, Severity::error));
  text += clipText(*s);
  text += "\n" + tr("judged %1").arg(QString::fromStdString(s->judged_under));
  if (!s->what_if_explains.empty()) text += "\n" + QString::fromStdString(s->what_if_explains);
  header_->setText(text);
  for (size_t i = 0; i < s->findings.size(); ++i) {
    const Finding& f = s->findings[i];
    auto* item = new QTreeWidgetItem(
        list_, {QString::fromLatin1(severity_name(f.severity)),
                QString::fromLatin1(finding_kind_name(f.kind)), QString::fromStdString(f.tensor),
                whereText(f), QString::number(f.count), QString::fromStdString(f.message)});
    item->setForeground(0, severityColor(f.severity));
    item->setData(0, kIndexRole, static_cast<int>(i));
    const QString remedy = tr("Remedy: %1").arg(QString::fromStdString(f.remedy));
    for (int c = 0; c < 6; ++c)
      item->setToolTip(c, QString::fromStdString(f.message) + "\n" + remedy);
  }
  updateReproButton();
}

void FindingsPanel::onActivated(QTreeWidgetItem* item) {
  const auto s = analysis_->summary();
  if (!s || item == nullptr) return;
  context_->focus(
      findingFocus(s->findings[static_cast<size_t>(item->data(0, kIndexRole).toInt())]));
}

}  // namespace attnscope
