// Wheel events ignored by unfocused controls (see WheelGuard.h).
#include "app/gui/WheelGuard.h"

#include <QAbstractSlider>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QEvent>
#include <QObject>
#include <QWidget>

namespace attnscope {
namespace {

// An ignored wheel event goes on to the parent (QApplication::notify), so returning true with
// the event ignored hands it to the scroll area instead of the control.
class WheelFilter : public QObject {
 public:
  using QObject::QObject;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    auto* widget = qobject_cast<QWidget*>(watched);
    if (event->type() != QEvent::Wheel || widget == nullptr || widget->hasFocus()) return false;
    event->ignore();
    return true;
  }
};

}  // namespace

void guardWheel(QWidget* root) {
  auto* filter = new WheelFilter(root);
  QList<QWidget*> controls;
  for (QComboBox* w : root->findChildren<QComboBox*>()) controls << w;
  for (QAbstractSpinBox* w : root->findChildren<QAbstractSpinBox*>()) controls << w;
  for (QAbstractSlider* w : root->findChildren<QAbstractSlider*>()) {
    if (!w->inherits("QScrollBar")) controls << w;
  }
  for (QWidget* w : controls) {
    w->setFocusPolicy(Qt::StrongFocus);
    w->installEventFilter(filter);
  }
}

}  // namespace attnscope
