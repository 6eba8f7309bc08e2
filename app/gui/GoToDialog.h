// The Ctrl+G dialog: heatmap tab, batch, head, row and column of the cell to go to. OK asks
// the owner to go there; a target the owner refuses (out of range) keeps the dialog open with
// the owner's message in red.
#pragma once

#include <QDialog>
#include <functional>

#include "app/gui/NavigationController.h"

class QComboBox;
class QLabel;
class QSpinBox;

namespace attnscope {

class GoToDialog : public QDialog {
  Q_OBJECT

 public:
  // The heatmap choice lists every HeadView in tab order.
  explicit GoToDialog(const CellTarget& start, QWidget* parent = nullptr);

  // Called on OK with the entered target; returns an error message, or an empty string when
  // the target was accepted (the dialog then closes).
  void setApply(std::function<QString(const CellTarget&)> apply);
  // The shape line shown under the tab choice ("S: 128 x 128 (query i x key j), ...").
  void setShapeText(std::function<QString(HeadView view)> shape);

  CellTarget target() const;
  void setTarget(const CellTarget& target);
  QString message() const;

  void accept() override;

 private:
  void showShape();

  std::function<QString(const CellTarget&)> apply_;
  std::function<QString(HeadView)> shape_;
  QComboBox* view_ = nullptr;
  QSpinBox* batch_ = nullptr;
  QSpinBox* head_ = nullptr;
  QSpinBox* row_ = nullptr;
  QSpinBox* col_ = nullptr;
  QLabel* shapeLabel_ = nullptr;
  QLabel* message_ = nullptr;
};

}  // namespace attnscope
