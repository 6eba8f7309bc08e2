// Hover readout and pinned cells (see InspectorPanel.h). Bit patterns come from the same
// conversions the kernels use (kernels/precision.h), so they match what the emulation stores.
#include "app/panels/InspectorPanel.h"

#include <algorithm>

#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "app/gui/SessionContext.h"
#include "app/plot/Colormaps.h"
#include "kernels/precision.h"

namespace attnscope {
namespace {

QString hex(uint32_t bits, int digits) {
  return QStringLiteral("0x%1").arg(bits, digits, 16, QLatin1Char('0'));
}

QString location(const CellReadout& r) {
  if (!r.pooled)
    return QStringLiteral("%1 [%2, %3]")
        .arg(QString::fromStdString(r.matrix))
        .arg(r.row)
        .arg(r.col);
  return QStringLiteral("%1 [%2:%3, %4:%5] (pooled block at [%6, %7])")
      .arg(QString::fromStdString(r.matrix))
      .arg(r.block.row_begin)
      .arg(r.block.row_end)
      .arg(r.block.col_begin)
      .arg(r.block.col_end)
      .arg(r.row)
      .arg(r.col);
}

QLabel* selectableLabel(QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->setFont(QFont(QStringLiteral("monospace")));
  return label;
}

}  // namespace

ValueBits describeValue(float value) {
  const uint16_t h = float_to_half_bits(value);
  const uint16_t b = float_to_bf16_bits(value);
  return {QStringLiteral("%1 (%2)").arg(formatNumber(value, 9), hex(float_bits(value), 8)),
          QStringLiteral("%1 (%2)").arg(formatNumber(half_bits_to_float(h), 9), hex(h, 4)),
          QStringLiteral("%1 (%2)").arg(formatNumber(bf16_bits_to_float(b), 9), hex(b, 4))};
}

InspectorPanel::InspectorPanel(SessionContext* context, QWidget* parent)
    : QWidget(parent), context_(context) {
  where_ = selectableLabel(this);
  where_->setObjectName(QStringLiteral("inspectorWhere"));
  cls_ = selectableLabel(this);
  fp32_ = selectableLabel(this);
  fp32_->setObjectName(QStringLiteral("inspectorFp32"));
  fp16_ = selectableLabel(this);
  fp16_->setObjectName(QStringLiteral("inspectorFp16"));
  bf16_ = selectableLabel(this);
  bf16_->setObjectName(QStringLiteral("inspectorBf16"));
  block_ = selectableLabel(this);
  auto* form = new QFormLayout;
  form->addRow(tr("cell"), where_);
  form->addRow(tr("class"), cls_);
  form->addRow(tr("fp32"), fp32_);
  form->addRow(tr("→ fp16"), fp16_);
  form->addRow(tr("→ bf16"), bf16_);
  form->addRow(tr("block"), block_);

  pinned_ = new QTreeWidget(this);
  pinned_->setObjectName(QStringLiteral("pinnedCells"));
  pinned_->setHeaderLabels({tr("cell"), tr("batch, head"), tr("fp32"), tr("fp16"), tr("bf16")});
  pinned_->setRootIsDecorated(false);
  pinned_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  auto* clear = new QPushButton(tr("Clear pins"), this);
  clear->setObjectName(QStringLiteral("clearPins"));

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addLayout(form);
  layout->addWidget(new QLabel(tr("Pinned (click a heatmap cell):"), this));
  layout->addWidget(pinned_, 1);
  layout->addWidget(clear);

  connect(clear, &QPushButton::clicked, this, &InspectorPanel::clearPins);
  connect(context_, &SessionContext::caseChanged, this, &InspectorPanel::showPins);
  connect(context_, &SessionContext::hoverChanged, this, &InspectorPanel::showHovered);
  connect(context_, &SessionContext::cellPinned, this, &InspectorPanel::addPin);
  showHovered();
}

void InspectorPanel::showHovered() {
  const CellReadout& r = context_->hovered();
  if (!r.valid()) {
    where_->setText(tr("hover a heatmap"));
    for (QLabel* l : {cls_, fp32_, fp16_, bf16_, block_}) l->clear();
    return;
  }
  const ValueBits bits = describeValue(r.value);
  where_->setText(location(r));
  cls_->setText(QString::fromLatin1(cell_class_name(r.cls)));
  fp32_->setText(bits.fp32);
  fp16_->setText(bits.fp16);
  bf16_->setText(bits.bf16);
  block_->setText(r.pooled ? tr("finite min %1, max %2; value shown: the larger |x|")
                                 .arg(formatNumber(r.min, 9), formatNumber(r.max, 9))
                           : tr("single element"));
}

QString InspectorPanel::readoutText() const {
  return QStringList({where_->text(), cls_->text(), fp32_->text(), fp16_->text(), bf16_->text(),
                      block_->text()})
      .join(QLatin1Char('\n'));
}

int InspectorPanel::pinnedCount() const {
  return pinned_->topLevelItemCount();
}

void InspectorPanel::addPin(const CellReadout& r) {
  pins_.push_back({context_->caseKey(), context_->batch(), context_->head(), r});
  showPins();
  pinned_->scrollToItem(pinned_->topLevelItem(pinned_->topLevelItemCount() - 1));
}

void InspectorPanel::showPins() {
  pinned_->clear();
  const QString key = context_->caseKey();
  for (const Pin& p : pins_) {
    if (p.caseKey != key) continue;
    const ValueBits bits = describeValue(p.cell.value);
    auto* item = new QTreeWidgetItem(
        pinned_, {location(p.cell), QStringLiteral("b%1 h%2").arg(p.batch).arg(p.head), bits.fp32,
                  bits.fp16, bits.bf16});
    item->setToolTip(0, QString::fromLatin1(cell_class_name(p.cell.cls)));
  }
}

void InspectorPanel::clearPins() {
  const QString key = context_->caseKey();
  pins_.erase(
      std::remove_if(pins_.begin(), pins_.end(), [&](const Pin& p) { return p.caseKey == key; }),
      pins_.end());
  showPins();
}

}  // namespace attnscope
