// List of the current case's annotations (see AnnotationListPanel.h).
#include "app/panels/AnnotationListPanel.h"

#include <QAction>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QPushButton>
#include <QSignalBlocker>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "app/export/HeadRowSeries.h"
#include "app/gui/SessionContext.h"
#include "core/view/head_view.h"

namespace attnscope {
namespace {

enum Column { kKind = 0, kText, kView, kHead, kPosition };
constexpr int kIndexRole = Qt::UserRole;
// Elements shown around an annotation when it is selected.
constexpr double kPadding = 8;

QString point(QPointF p) {
  return QStringLiteral("(%1, %2)").arg(p.y(), 0, 'f', 1).arg(p.x(), 0, 'f', 1);
}

// The elements [begin, end) covering [lo, hi] with padding, inside [0, size).
std::pair<int64_t, int64_t> span(double lo, double hi, int64_t size) {
  const auto begin = static_cast<int64_t>(std::floor(lo - kPadding + 0.5));
  const auto end = static_cast<int64_t>(std::ceil(hi + kPadding + 0.5));
  return {std::clamp<int64_t>(begin, 0, size - 1), std::clamp<int64_t>(end, 1, size)};
}

}  // namespace

AnnotationListPanel::AnnotationListPanel(SessionContext* context, QWidget* parent)
    : QWidget(parent), context_(context) {
  tree_ = new QTreeWidget(this);
  tree_->setObjectName(QStringLiteral("annotationList"));
  tree_->setHeaderLabels(
      {tr("kind"), tr("text"), tr("view"), tr("b / h"), tr("position (row, col)")});
  tree_->setRootIsDecorated(false);
  tree_->setEditTriggers(QAbstractItemView::DoubleClicked | QAbstractItemView::EditKeyPressed);
  tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  tree_->header()->setSectionResizeMode(kText, QHeaderView::Stretch);
  tree_->header()->setStretchLastSection(false);
  edit_ = new QPushButton(tr("Edit text"), this);
  delete_ = new QPushButton(tr("Delete"), this);
  delete_->setObjectName(QStringLiteral("deleteAnnotation"));
  auto* deleteKey = new QAction(tree_);
  deleteKey->setShortcut(QKeySequence::Delete);
  deleteKey->setShortcutContext(Qt::WidgetShortcut);
  tree_->addAction(deleteKey);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(edit_);
  buttons->addWidget(delete_);
  buttons->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(2, 2, 2, 2);
  layout->addWidget(tree_, 1);
  layout->addLayout(buttons);

  connect(context_->annotations(), &AnnotationBoard::changed, this, &AnnotationListPanel::rebuild);
  connect(tree_, &QTreeWidget::itemChanged, this, &AnnotationListPanel::onItemChanged);
  connect(tree_, &QTreeWidget::currentItemChanged, this,
          [this](QTreeWidgetItem* item) { showAnnotation(item); });
  connect(edit_, &QPushButton::clicked, this, [this] {
    if (tree_->currentItem() != nullptr) tree_->editItem(tree_->currentItem(), kText);
  });
  connect(delete_, &QPushButton::clicked, this, &AnnotationListPanel::deleteSelected);
  connect(deleteKey, &QAction::triggered, this, &AnnotationListPanel::deleteSelected);
  rebuild();
}

QString AnnotationListPanel::positionText(const Annotation& a) {
  return a.kind == AnnotationKind::text ? point(a.from)
                                        : point(a.from) + QStringLiteral(" → ") + point(a.to);
}

void AnnotationListPanel::rebuild() {
  const QSignalBlocker block(tree_);
  const int current = tree_->currentItem() ? tree_->indexOfTopLevelItem(tree_->currentItem()) : -1;
  tree_->clear();
  listed_ = context_->annotations()->caseAnnotations();
  for (int i = 0; i < listed_.size(); ++i) {
    const Annotation& a = listed_[i];
    auto* item = new QTreeWidgetItem(
        tree_, {annotationKindName(a.kind), a.text, a.view,
                QStringLiteral("b%1 h%2").arg(a.batch).arg(a.head), positionText(a)});
    item->setFlags(item->flags() | Qt::ItemIsEditable);
    item->setData(kKind, kIndexRole, i);
  }
  if (current >= 0 && current < tree_->topLevelItemCount()) {
    tree_->setCurrentItem(tree_->topLevelItem(current));
  }
  edit_->setEnabled(!listed_.isEmpty());
  delete_->setEnabled(!listed_.isEmpty());
}

void AnnotationListPanel::onItemChanged(QTreeWidgetItem* item, int column) {
  const int index = item->data(kKind, kIndexRole).toInt();
  if (column != kText || index < 0 || index >= listed_.size()) return;
  Annotation edited = listed_[index];
  edited.text = item->text(kText).trimmed();
  if (edited.text == listed_[index].text) return;
  if (edited.kind == AnnotationKind::text && edited.text.isEmpty()) {
    const QSignalBlocker block(tree_);
    item->setText(kText, listed_[index].text);  // a text annotation needs its text
    return;
  }
  context_->annotations()->replace(listed_[index], edited);
}

void AnnotationListPanel::showAnnotation(QTreeWidgetItem* item) {
  const CaseInfo* info = context_->caseInfo();
  if (item == nullptr || info == nullptr) return;
  const Annotation& a = listed_[item->data(kKind, kIndexRole).toInt()];
  if (const auto series = rowSeriesOfView(a.view)) {
    if (a.batch >= info->dims.batch || a.head >= info->dims.heads) return;
    context_->showRowSeries(a.batch, a.head, *series);
    return;
  }
  const std::optional<HeadView> view = head_view_named(a.view.toStdString());
  if (!view || a.batch >= info->dims.batch || a.head >= info->dims.heads) return;
  const auto [rows, cols] = head_view_shape(*view, info->dims);
  const auto [r0, r1] = span(std::min(a.from.y(), a.to.y()), std::max(a.from.y(), a.to.y()), rows);
  const auto [c0, c1] = span(std::min(a.from.x(), a.to.x()), std::max(a.from.x(), a.to.x()), cols);
  context_->showRegion(RegionRequest{*view, a.batch, a.head, MatrixWindow{r0, r1, c0, c1}, {}});
}

bool AnnotationListPanel::deleteSelected() {
  QTreeWidgetItem* item = tree_->currentItem();
  if (item == nullptr) return false;
  return context_->annotations()->remove(listed_[item->data(kKind, kIndexRole).toInt()]);
}

}  // namespace attnscope
