// The run's NaN / Inf sites in execution order (see OriginPanel.h).
#include "app/panels/OriginPanel.h"

#include <QHeaderView>
#include <QLabel>
#include <QLocale>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "app/gui/FindingNavigator.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"

namespace attnscope {
namespace {

// On a site row: the file index, the case path, the side and the site's index on that side.
constexpr int kFileRole = Qt::UserRole;
constexpr int kCaseRole = Qt::UserRole + 1;
constexpr int kBackwardRole = Qt::UserRole + 2;
constexpr int kSiteRole = Qt::UserRole + 3;

QString rangeText(const char* what, const IndexRange& r) {
  if (!r.valid()) return {};
  return QStringLiteral(" %1 %2").arg(
      QLatin1String(what), r.first == r.last ? QString::number(r.first)
                                             : QStringLiteral("%1-%2").arg(r.first).arg(r.last));
}

}  // namespace

OriginPanel::OriginPanel(SessionContext* context, ScanController* scans,
                         FindingNavigator* navigator, QWidget* parent)
    : QWidget(parent), context_(context), scans_(scans), navigator_(navigator) {
  header_ = new QLabel(this);
  header_->setObjectName(QStringLiteral("originHeader"));
  header_->setWordWrap(true);
  list_ = new QTreeWidget(this);
  list_->setObjectName(QStringLiteral("originList"));
  list_->setHeaderLabels({tr("where"), tr("tab"), tr("at"), tr("count"), tr("kind")});
  list_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(header_);
  layout->addWidget(list_, 1);
  connect(list_, &QTreeWidget::itemClicked, this, &OriginPanel::onActivated);
  connect(list_, &QTreeWidget::itemActivated, this, &OriginPanel::onActivated);
  connect(scans_, &ScanController::scanChanged, this, &OriginPanel::refresh);
  connect(context_, &SessionContext::filesChanged, this, &OriginPanel::refresh);
  connect(context_, &SessionContext::caseChanged, this, &OriginPanel::refresh);
  refresh();
}

void OriginPanel::refresh() {
  list_->clear();
  const int file = context_->fileIndex();
  if (file < 0) {
    header_->setText(tr("No dump open."));
    return;
  }
  const ScannedOutcomes scanned = scans_->outcomes(context_->runFiles(file));
  const std::vector<NonfiniteEvent> events = nonfinite_events(scanned.outcomes);
  const QString progress = scanned.complete ? QString() : tr(" (scan running: so far)");
  header_->setText(events.empty()
                       ? tr("No NaN / Inf in the cases scanned%1.").arg(progress)
                       : tr("%n case side(s) with NaN / Inf in execution order%1; the first is "
                            "where it started.",
                            nullptr, static_cast<int>(events.size()))
                             .arg(progress));
  for (const NonfiniteEvent& e : events) {
    auto* row = new QTreeWidgetItem(list_, {QString::fromStdString(e.place)});
    row->setFirstColumnSpanned(true);
    const auto& [fileIndex, scannedCase] = scanned.where[e.index];
    for (size_t s = 0; s < e.sites.size(); ++s) {
      const NonfiniteSite& site = e.sites[s];
      auto* item =
          new QTreeWidgetItem(row, {QString::fromLatin1(nonfinite_stage_name(site.stage)),
                                    QString::fromStdString(site.view),
                                    QStringLiteral("b%1 h%2").arg(site.batch).arg(site.head) +
                                        rangeText("rows", site.rows) + rangeText("cols", site.cols),
                                    QLocale().toString(static_cast<qlonglong>(site.count)),
                                    QString::fromStdString(site.kind)});
      item->setToolTip(0, QString::fromStdString(site.message));
      item->setData(0, kFileRole, fileIndex);
      item->setData(0, kCaseRole, QString::fromStdString(scannedCase->path));
      item->setData(0, kBackwardRole, e.backward);
      item->setData(0, kSiteRole, static_cast<int>(s));
    }
  }
  list_->expandAll();
}

void OriginPanel::activate(int event, int site) {
  QTreeWidgetItem* row = list_->topLevelItem(event);
  if (row && site >= 0 && site < row->childCount()) onActivated(row->child(site));
}

void OriginPanel::onActivated(QTreeWidgetItem* item) {
  if (!item || !item->parent()) return;
  const int file = item->data(0, kFileRole).toInt();
  const QString casePath = item->data(0, kCaseRole).toString();
  const int siteIndex = item->data(0, kSiteRole).toInt();
  const ScannedOutcomes scanned = scans_->outcomes(context_->runFiles(file));
  for (size_t n = 0; n < scanned.where.size(); ++n) {
    if (scanned.where[n].first != file || scanned.where[n].second->path != casePath.toStdString()) {
      continue;
    }
    const bool backward = item->data(0, kBackwardRole).toBool();
    std::vector<NonfiniteSite> side;
    for (const NonfiniteSite& s : scanned.outcomes[n].nonfinite) {
      if (is_backward_stage(s.stage) == backward) side.push_back(s);
    }
    if (siteIndex < static_cast<int>(side.size())) {
      navigator_->goToSite(file, casePath, side[static_cast<size_t>(siteIndex)]);
    }
    return;
  }
}

}  // namespace attnscope
