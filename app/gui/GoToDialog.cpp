// Go-to-cell dialog (see GoToDialog.h).
#include "app/gui/GoToDialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>
#include <limits>

namespace attnscope {
namespace {

// Any index can be typed; the owner checks the range and says what is valid.
QSpinBox* indexBox(const QString& name, QWidget* parent) {
  auto* box = new QSpinBox(parent);
  box->setObjectName(name);
  box->setRange(-1, std::numeric_limits<int>::max());
  box->setAccelerated(true);
  return box;
}

}  // namespace

GoToDialog::GoToDialog(const CellTarget& start, QWidget* parent) : QDialog(parent) {
  setObjectName(QStringLiteral("goToDialog"));
  setWindowTitle(tr("Go to cell"));
  view_ = new QComboBox(this);
  view_->setObjectName(QStringLiteral("goToView"));
  for (HeadView v : kHeadViews) view_->addItem(QString::fromLatin1(head_view_name(v)));
  batch_ = indexBox(QStringLiteral("goToBatch"), this);
  head_ = indexBox(QStringLiteral("goToHead"), this);
  row_ = indexBox(QStringLiteral("goToRow"), this);
  col_ = indexBox(QStringLiteral("goToCol"), this);
  shapeLabel_ = new QLabel(this);
  shapeLabel_->setObjectName(QStringLiteral("goToShape"));
  message_ = new QLabel(this);
  message_->setObjectName(QStringLiteral("goToMessage"));
  message_->setStyleSheet(QStringLiteral("color: #b00020"));
  message_->setWordWrap(true);

  auto* form = new QFormLayout;
  form->addRow(tr("&Heatmap"), view_);
  form->addRow(QString(), shapeLabel_);
  form->addRow(tr("&Batch"), batch_);
  form->addRow(tr("H&ead"), head_);
  form->addRow(tr("&Row"), row_);
  form->addRow(tr("&Column"), col_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(message_);
  layout->addWidget(buttons);

  connect(buttons, &QDialogButtonBox::accepted, this, &GoToDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &GoToDialog::reject);
  connect(view_, &QComboBox::currentTextChanged, this, &GoToDialog::showShape);
  setTarget(start);
  row_->setFocus();
  row_->selectAll();
}

void GoToDialog::setApply(std::function<QString(const CellTarget&)> apply) {
  apply_ = std::move(apply);
}

void GoToDialog::setShapeText(std::function<QString(HeadView)> shape) {
  shape_ = std::move(shape);
  showShape();
}

CellTarget GoToDialog::target() const {
  return {kHeadViews[view_->currentIndex()], batch_->value(), head_->value(), row_->value(),
          col_->value()};
}

void GoToDialog::setTarget(const CellTarget& t) {
  view_->setCurrentIndex(static_cast<int>(t.view));  // items in kHeadViews order
  batch_->setValue(static_cast<int>(t.batch));
  head_->setValue(static_cast<int>(t.head));
  row_->setValue(static_cast<int>(t.row));
  col_->setValue(static_cast<int>(t.col));
  showShape();
}

QString GoToDialog::message() const {
  return message_->text();
}

void GoToDialog::showShape() {
  shapeLabel_->setText(shape_ ? shape_(target().view) : QString());
}

void GoToDialog::accept() {
  const QString error = apply_ ? apply_(target()) : QString();
  message_->setText(error);
  if (error.isEmpty()) QDialog::accept();
}

}  // namespace attnscope
