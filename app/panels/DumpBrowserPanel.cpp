// Tree of open dumps and their cases (see DumpBrowserPanel.h).
#include "app/panels/DumpBrowserPanel.h"

#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontMetrics>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLineEdit>
#include <QMenu>
#include <QMimeData>
#include <QResizeEvent>
#include <QSignalBlocker>
#include <QToolButton>
#include <QTreeWidget>
#include <QTreeWidgetItemIterator>
#include <QVBoxLayout>
#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/SeverityStyle.h"

namespace attnscope {
namespace {

constexpr int kFileRole = Qt::UserRole;
constexpr int kCaseRole = Qt::UserRole + 1;
constexpr int kNameRole = Qt::UserRole + 2;
constexpr int kBrokenRole = Qt::UserRole + 3;  // case whose data cannot be read: its message
constexpr int kTipRole = Qt::UserRole + 4;     // the case's tooltip before its scan status
constexpr int kStatusRole = Qt::UserRole + 5;  // the scan status text (caseStatus)
constexpr int kCaseColumnPx = 170;             // the case column's room before others show
constexpr int kColumnPadPx = 12;               // a column's margins around its widest text

// A case row: readable cases and broken ones (with their error) in one case order.
struct CaseRow {
  const CaseInfo* info;
  const Error* broken;  // null for a readable case
};

std::vector<CaseRow> caseRows(const DumpReader& reader) {
  std::vector<CaseRow> rows;
  for (const CaseInfo& c : reader.cases()) rows.push_back({&c, nullptr});
  for (const BrokenCase& b : reader.broken()) rows.push_back({&b.info, &b.error});
  std::stable_sort(rows.begin(), rows.end(), [](const CaseRow& a, const CaseRow& b) {
    return case_order_less(*a.info, *b.info);
  });
  return rows;
}

QString shapeText(const CaseDims& d) {
  QString s = QStringLiteral("B%1 H%2").arg(d.batch).arg(d.heads);
  if (d.kv_heads != d.heads) s += QStringLiteral("/%1").arg(d.kv_heads);
  s += QStringLiteral(" S%1").arg(d.seqlen_q);
  if (d.seqlen_k != d.seqlen_q) s += QStringLiteral("x%1").arg(d.seqlen_k);
  return s + QStringLiteral(" D%1").arg(d.head_dim);
}

// A rejected group's error "FILE: /object: problem" as (/object, problem): the row names the
// object under its file's row, the tooltip adds the problem and hint without repeating either.
std::pair<QString, QString> rejectedText(const QString& file, const Error& e) {
  QString rest = QString::fromStdString(e.message);
  if (rest.startsWith(file + QStringLiteral(": "))) rest.remove(0, file.size() + 2);
  const qsizetype colon = rest.indexOf(QStringLiteral(": "));
  if (!rest.startsWith(QLatin1Char('/')) || colon < 0) return {QString(), rest};
  return {rest.left(colon), rest.mid(colon + 2)};
}

bool isCase(const QTreeWidgetItem* item) {
  return item->data(0, kCaseRole).isValid();
}

// Whether `item` is the row of open file `fileIndex` (a file, or a rank of a run folder).
bool isFileRow(const QTreeWidgetItem* item, int fileIndex) {
  const QVariant file = item->data(0, kFileRole);
  return !isCase(item) && file.isValid() && file.toInt() == fileIndex;
}

// "series.h5"; a rank of a run folder: "rank 1 (node-b, rank_00001.h5)".
QString fileLabel(const OpenDump& dump) {
  const QString name = QFileInfo(dump.path).fileName();
  if (dump.run.folder.isEmpty()) return name;
  const QString file = QDir(dump.run.folder).relativeFilePath(dump.path);
  return DumpBrowserPanel::tr("rank %1 (%2)")
      .arg(dump.run.rank)
      .arg(dump.run.host.isEmpty() ? file : dump.run.host + QStringLiteral(", ") + file);
}

// Expands `item` and every group below it (run, ranks, file, steps), not the cases.
void expandGroups(QTreeWidgetItem* item) {
  item->setExpanded(true);
  for (int i = 0; i < item->childCount(); ++i) {
    if (!isCase(item->child(i))) expandGroups(item->child(i));
  }
}

// Shows items matching `text` (and their ancestors); returns whether anything under `item` shows.
bool filterItem(QTreeWidgetItem* item, const QString& text) {
  if (isCase(item)) {
    const bool match = text.isEmpty() || item->text(0).contains(text, Qt::CaseInsensitive) ||
                       item->data(0, kCaseRole).toString().contains(text, Qt::CaseInsensitive) ||
                       item->data(0, kNameRole).toString().contains(text, Qt::CaseInsensitive);
    item->setHidden(!match);
    return match;
  }
  bool any = false;
  for (int i = 0; i < item->childCount(); ++i) any = filterItem(item->child(i), text) || any;
  item->setHidden(!any && item->parent() != nullptr);
  return any;
}

}  // namespace

DumpBrowserPanel::DumpBrowserPanel(SessionContext* context, ScanController* scans, QWidget* parent)
    : QWidget(parent), context_(context), scans_(scans) {
  setAcceptDrops(true);
  filter_ = new QLineEdit(this);
  filter_->setObjectName(QStringLiteral("caseFilter"));
  filter_->setPlaceholderText(tr("Filter cases (path, name)"));
  filter_->setClearButtonEnabled(true);
  auto* open = new QToolButton(this);
  open->setText(tr("Open…"));
  open->setToolTip(
      tr("Open dump files (Ctrl+O) or a run folder (Ctrl+Shift+O); or drop them here"));
  recentMenu_ = new QMenu(tr("Open &Recent"), this);
  open->setMenu(recentMenu_);
  open->setPopupMode(QToolButton::MenuButtonPopup);

  tree_ = new QTreeWidget(this);
  tree_->setObjectName(QStringLiteral("caseTree"));
  tree_->setHeaderLabels({tr("case"), tr("shape"), tr("dtype")});
  tree_->header()->setSectionResizeMode(0, QHeaderView::Stretch);
  // Shape and dtype are sized to their contents once per rebuild (ResizeToContents would
  // measure every row on each relayout).
  tree_->header()->setStretchLastSection(false);
  tree_->setUniformRowHeights(true);
  tree_->setTextElideMode(Qt::ElideMiddle);  // a case path keeps its start and its end
  tree_->setIndentation(14);

  auto* top = new QHBoxLayout;
  top->addWidget(filter_, 1);
  top->addWidget(open);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addLayout(top);
  layout->addWidget(tree_, 1);

  connect(open, &QToolButton::clicked, this, &DumpBrowserPanel::openWithDialog);
  connect(filter_, &QLineEdit::textChanged, this, &DumpBrowserPanel::applyFilter);
  connect(tree_, &QTreeWidget::currentItemChanged, this,
          [this](QTreeWidgetItem* item) { onCurrentItemChanged(item); });
  connect(context_, &SessionContext::filesChanged, this, &DumpBrowserPanel::rebuild);
  connect(context_, &SessionContext::filesChanged, this, &DumpBrowserPanel::updateRecentMenu);
  connect(context_, &SessionContext::caseChanged, this, &DumpBrowserPanel::showCurrentCase);
  connect(scans_, &ScanController::scanChanged, this, &DumpBrowserPanel::showScan);
  updateRecentMenu();
}

void DumpBrowserPanel::openWithDialog() {
  const QStringList paths =
      QFileDialog::getOpenFileNames(this, tr("Open attention dumps"), QString(),
                                    tr("Attention dumps (*.h5 *.hdf5 *.hdf *.pt *.pth *.npz "
                                       "*.safetensors);;HDF5 dumps (*.h5 *.hdf5 *.hdf);;"
                                       "torch.save files (*.pt *.pth);;NumPy archives (*.npz);;"
                                       "safetensors files (*.safetensors);;All files (*)"));
  openFiles(paths);
}

void DumpBrowserPanel::openFolderWithDialog() {
  const QString folder = QFileDialog::getExistingDirectory(this, tr("Open run folder"));
  if (!folder.isEmpty()) openFiles({folder});
}

void DumpBrowserPanel::openFiles(const QStringList& paths) {
  if (!paths.isEmpty()) emit openRequested(paths);
}

void DumpBrowserPanel::setFilter(const QString& text) {
  filter_->setText(text);
}

void DumpBrowserPanel::rebuild() {
  // Thousands of cases: the items are built detached and inserted in one call per level, with
  // the view's signals and painting off (item-by-item insertion into the live view relaid it out
  // per row).
  const QSignalBlocker block(tree_);
  tree_->setUpdatesEnabled(false);
  tree_->clear();
  QList<QTreeWidgetItem*> tops;
  std::set<QString> runs;  // run folders listed
  for (int f = 0; f < context_->fileCount(); ++f) {
    const QString& run = context_->file(f).run.folder;
    if (run.isEmpty()) {
      tops << fileItem(f);
    } else if (runs.insert(run).second) {
      tops << runItem(f);
    }
  }
  tree_->addTopLevelItems(tops);
  for (QTreeWidgetItem* top : tops) {
    expandGroups(top);
    // A rank's "rank N (host, file)" takes the whole row (its counts are in its tooltip).
    if (top->data(0, kFileRole).isValid()) continue;
    for (int r = 0; r < top->childCount(); ++r) top->child(r)->setFirstColumnSpanned(true);
  }
  applyFilter();
  tree_->resizeColumnToContents(1);
  tree_->resizeColumnToContents(2);
  const QFontMetrics metrics(tree_->font());
  for (int column : {1, 2}) {
    columnPx_[column] = 0;
    for (QTreeWidgetItemIterator it(tree_); *it; ++it) {
      columnPx_[column] = std::max(columnPx_[column],
                                   metrics.horizontalAdvance((*it)->text(column)) + kColumnPadPx);
    }
  }
  fitColumns();
  tree_->setUpdatesEnabled(true);
  for (QTreeWidgetItem* top : tops) showScanUnder(top);
  showCurrentCase();
}

QTreeWidgetItem* DumpBrowserPanel::runItem(int fileIndex) const {
  const QString& folder = context_->file(fileIndex).run.folder;
  auto* run = new QTreeWidgetItem(QStringList{QFileInfo(folder).fileName()});
  run->setToolTip(0, tr("run folder %1").arg(folder));
  run->setFlags(Qt::ItemIsEnabled);
  const std::vector<int> ranks = context_->runFiles(fileIndex);
  run->setText(1, tr("%n rank(s)", nullptr, static_cast<int>(ranks.size())));
  QList<QTreeWidgetItem*> children;
  for (int f : ranks) children << fileItem(f);
  run->addChildren(children);
  return run;
}

QTreeWidgetItem* DumpBrowserPanel::topItemOf(int fileIndex) const {
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) {
    QTreeWidgetItem* top = tree_->topLevelItem(i);
    if (isFileRow(top, fileIndex)) return top;
    for (int r = 0; r < top->childCount(); ++r) {
      if (isFileRow(top->child(r), fileIndex)) return top;
    }
  }
  return nullptr;
}

QTreeWidgetItem* DumpBrowserPanel::fileItem(int fileIndex) const {
  const OpenDump& dump = context_->file(fileIndex);
  auto* file = new QTreeWidgetItem(QStringList{fileLabel(dump)});
  file->setToolTip(0, dump.path);
  file->setData(0, kFileRole, fileIndex);
  file->setText(1, tr("%n case(s)", nullptr, static_cast<int>(dump.reader->cases().size())));
  if (!dump.reader->broken().empty()) {
    file->setText(2, tr("%n unreadable", nullptr, static_cast<int>(dump.reader->broken().size())));
  }
  if (!dump.run.folder.isEmpty()) {
    file->setToolTip(0, QStringList{dump.path, file->text(1), file->text(2)}.join('\n').trimmed());
  }
  file->setFlags(Qt::ItemIsEnabled);
  QList<QTreeWidgetItem*> children;           // the file's children, in first-seen order
  std::map<int64_t, QTreeWidgetItem*> steps;  // step -> its group among `children`
  for (const auto& [info, broken] : caseRows(*dump.reader)) {
    const CaseInfo& c = *info;
    const QString path = QString::fromStdString(c.path);
    QString label = path;
    QTreeWidgetItem* step = nullptr;
    if (c.config.step) {
      auto [it, added] = steps.try_emplace(*c.config.step, nullptr);
      if (added) {
        it->second = new QTreeWidgetItem(QStringList{tr("step %1").arg(*c.config.step)});
        it->second->setFlags(Qt::ItemIsEnabled);
        children << it->second;
      }
      step = it->second;
      if (c.config.layer) label = tr("layer %1").arg(*c.config.layer);
    }
    auto* item = new QTreeWidgetItem(
        QStringList{label, shapeText(c.dims), QString::fromStdString(c.config.dtype)});
    item->setData(0, kFileRole, fileIndex);
    item->setData(0, kCaseRole, path);
    const QString name = QString::fromStdString(c.config.name);
    item->setData(0, kNameRole, name);
    const QString description = QString::fromStdString(c.config.description);
    QStringList tip{path, name, description, shapeText(c.dims)};
    if (!c.config.dtype.empty()) tip.back() += QStringLiteral(" · ") + item->text(2);
    tip.removeAll(QString());
    item->setToolTip(0, tip.join(QLatin1Char('\n')));
    item->setData(0, kTipRole, item->toolTip(0));
    if (broken != nullptr) {
      // Selectable (selecting it explains why it cannot be shown), greyed, error as tooltip.
      item->setData(0, kBrokenRole, QString::fromStdString(broken->message));
      item->setToolTip(0, QString::fromStdString(broken->describe()));
      for (int column = 0; column < 3; ++column) {
        item->setForeground(column, tree_->palette().brush(QPalette::Disabled, QPalette::Text));
      }
    }
    if (step != nullptr) {
      step->addChild(item);
    } else {
      children << item;
    }
  }
  if (!dump.reader->rejected().empty()) {
    auto* rejected = new QTreeWidgetItem(
        QStringList{tr("rejected groups (%1)").arg(dump.reader->rejected().size())});
    rejected->setFlags(Qt::ItemIsEnabled);
    for (const Error& e : dump.reader->rejected()) {
      const auto [where, problem] = rejectedText(dump.path, e);
      auto* item = new QTreeWidgetItem(
          rejected, {where.isEmpty() ? problem : where + QStringLiteral(": ") + problem});
      QString tip = problem;
      if (!e.hint.empty()) tip += tr("\nhint: %1").arg(QString::fromStdString(e.hint));
      item->setToolTip(0, tip);
      item->setFlags(Qt::NoItemFlags);
    }
    children << rejected;
  }
  file->addChildren(children);
  return file;
}

void DumpBrowserPanel::applyFilter() {
  const QString text = filter_->text().trimmed();
  for (int i = 0; i < tree_->topLevelItemCount(); ++i) filterItem(tree_->topLevelItem(i), text);
}

QStringList DumpBrowserPanel::casePaths(int fileIndex) const {
  QStringList out;
  for (QTreeWidgetItemIterator it(tree_); *it; ++it) {
    if (isCase(*it) && (*it)->data(0, kFileRole).toInt() == fileIndex) {
      out << (*it)->data(0, kCaseRole).toString();
    }
  }
  return out;
}

int DumpBrowserPanel::visibleCaseCount() const {
  int n = 0;
  for (QTreeWidgetItemIterator it(tree_); *it; ++it) n += isCase(*it) && !(*it)->isHidden();
  return n;
}

void DumpBrowserPanel::updateRecentMenu() {
  recentMenu_->clear();
  for (const QString& path : context_->recentFiles()) {
    recentMenu_->addAction(path, this, [this, path] { openFiles({path}); });
  }
  recentMenu_->setEnabled(!recentMenu_->isEmpty());
}

void DumpBrowserPanel::showCurrentCase() {
  for (QTreeWidgetItemIterator it(tree_); *it; ++it) {
    if (isCase(*it) && (*it)->data(0, kFileRole).toInt() == context_->fileIndex() &&
        (*it)->data(0, kCaseRole).toString() == context_->casePath()) {
      const QSignalBlocker block(tree_);
      tree_->setCurrentItem(*it);
      tree_->scrollToItem(*it);
      return;
    }
  }
}

void DumpBrowserPanel::onCurrentItemChanged(QTreeWidgetItem* item) {
  if (item == nullptr || !isCase(item)) return;
  if (item->data(0, kBrokenRole).isValid()) {
    const int fileIndex = item->data(0, kFileRole).toInt();
    const std::string path = item->data(0, kCaseRole).toString().toStdString();
    for (const BrokenCase& b : context_->file(fileIndex).reader->broken()) {
      if (b.info.path != path) continue;
      emit context_->errorRaised(tr("Cannot show %1").arg(QString::fromStdString(path)),
                                 QString::fromStdString(b.error.message),
                                 QString::fromStdString(b.error.hint));
    }
    return;
  }
  context_->selectCase(item->data(0, kFileRole).toInt(), item->data(0, kCaseRole).toString());
}

void DumpBrowserPanel::resizeEvent(QResizeEvent* event) {
  QWidget::resizeEvent(event);
  fitColumns();
}

void DumpBrowserPanel::fitColumns() {
  // The case column keeps room for a name: dtype, then shape, hide first (both stay in the
  // case's tooltip).
  const int room = tree_->viewport()->width() - kCaseColumnPx;
  tree_->setColumnHidden(2, room < columnPx_[1] + columnPx_[2]);
  tree_->setColumnHidden(1, room < columnPx_[1]);
}

QString DumpBrowserPanel::caseStatus(int fileIndex, const QString& casePath) const {
  for (QTreeWidgetItemIterator it(tree_); *it; ++it) {
    if (isCase(*it) && (*it)->data(0, kFileRole).toInt() == fileIndex &&
        (*it)->data(0, kCaseRole).toString() == casePath) {
      return (*it)->data(0, kStatusRole).toString();
    }
  }
  return {};
}

void DumpBrowserPanel::showScan(const QString& file) {
  const int fileIndex = context_->indexOfFile(file);
  if (QTreeWidgetItem* top = fileIndex < 0 ? nullptr : topItemOf(fileIndex)) showScanUnder(top);
}

void DumpBrowserPanel::showScanUnder(QTreeWidgetItem* top) {
  // The scan of each file below `top` (a run folder's ranks each have their own), by case path.
  std::map<int, std::map<std::string, const ScannedCase*>> byFile;
  std::vector<std::shared_ptr<const DumpScan>> scans;  // holds what byFile points into
  const auto scanned = [&](int fileIndex, const std::string& path) -> const ScannedCase* {
    auto [cases, added] = byFile.try_emplace(fileIndex);
    if (added) {
      if (auto scan = scans_->scan(context_->file(fileIndex).path)) {
        for (const ScannedCase& c : scan->cases) cases->second[c.path] = &c;
        scans.push_back(std::move(scan));
      }
    }
    const auto it = cases->second.find(path);
    return it == cases->second.end() ? nullptr : it->second;
  };
  // Depth first: a case's badge, then each step's, file's and run's worst badge below them.
  struct Below {
    std::optional<Severity> worst;
    bool cases = false, pending = false;
  };
  const std::function<Below(QTreeWidgetItem*)> show = [&](QTreeWidgetItem* item) -> Below {
    if (!isCase(item)) {
      Below below;
      for (int i = 0; i < item->childCount(); ++i) {
        const Below child = show(item->child(i));
        if (child.worst) below.worst = std::min(below.worst.value_or(*child.worst), *child.worst);
        below.cases = below.cases || child.cases;
        below.pending = below.pending || child.pending;
      }
      if (below.cases) {
        item->setIcon(0, below.worst     ? severityBadge(below.worst)
                         : below.pending ? pendingBadge()
                                         : severityBadge(std::nullopt));
      }
      return below;
    }
    if (item->data(0, kBrokenRole).isValid()) return {};
    const ScannedCase* c = scanned(item->data(0, kFileRole).toInt(),
                                   item->data(0, kCaseRole).toString().toStdString());
    QString status;
    Below below{std::nullopt, true, false};
    if (c == nullptr || c->state == ScanState::pending) {
      item->setIcon(0, pendingBadge());
      status = tr("scanning");
      below.pending = true;
    } else if (c->state == ScanState::error) {
      item->setIcon(0, unscannableBadge());
      status = tr("not scanned: %1").arg(QString::fromStdString(c->error));
    } else {
      item->setIcon(0, severityBadge(c->verdict.worst));
      status = QString::fromStdString(verdict_text(c->verdict));
      below.worst = c->verdict.worst;
    }
    item->setData(0, kStatusRole, status);
    item->setToolTip(0, item->data(0, kTipRole).toString() + QStringLiteral("\n") + status);
    return below;
  };
  show(top);
}

void DumpBrowserPanel::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void DumpBrowserPanel::dropEvent(QDropEvent* event) {
  QStringList paths;
  for (const QUrl& url : event->mimeData()->urls()) {
    if (url.isLocalFile()) paths << url.toLocalFile();
  }
  event->acceptProposedAction();
  openFiles(paths);
}

}  // namespace attnscope
