// Window shortcuts over text fields (see WindowShortcuts.h).
#include "app/gui/WindowShortcuts.h"

#include <QEvent>
#include <QKeyEvent>
#include <QLineEdit>
#include <QWidget>

namespace attnscope {
namespace {

// The editing keys a text field keeps.
constexpr QKeySequence::StandardKey kEditingKeys[] = {QKeySequence::Copy,
                                                      QKeySequence::Cut,
                                                      QKeySequence::Paste,
                                                      QKeySequence::Undo,
                                                      QKeySequence::Redo,
                                                      QKeySequence::SelectAll,
                                                      QKeySequence::MoveToNextWord,
                                                      QKeySequence::MoveToPreviousWord,
                                                      QKeySequence::SelectNextWord,
                                                      QKeySequence::SelectPreviousWord,
                                                      QKeySequence::DeleteEndOfWord,
                                                      QKeySequence::DeleteStartOfWord};

const char* const kFilterName = "attnscopeShortcutPassThrough";

class PassThrough : public QObject {
 public:
  using QObject::QObject;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    // Filtered (not seen by the field) and left unaccepted, the override request lets the
    // window's shortcut fire.
    if (event->type() == QEvent::ShortcutOverride &&
        windowShortcutWins(*static_cast<QKeyEvent*>(event))) {
      return true;
    }
    return QObject::eventFilter(watched, event);
  }
};

}  // namespace

bool windowShortcutWins(const QKeyEvent& key) {
  const Qt::KeyboardModifiers mods = key.modifiers() & (Qt::ControlModifier | Qt::AltModifier);
  if (mods == Qt::NoModifier) return false;
  // Home / End / arrows with Ctrl are word and line moves: the field's.
  const int k = key.key();
  if (k == Qt::Key_Home || k == Qt::Key_End || k == Qt::Key_Left || k == Qt::Key_Right ||
      k == Qt::Key_Backspace || k == Qt::Key_Delete) {
    return false;
  }
  // Not kept: the X11 Emacs-style line moves (Ctrl+E end of line); Home / End do the same.
  for (QKeySequence::StandardKey editing : kEditingKeys) {
    if (key.matches(editing)) return false;
  }
  return true;
}

void letWindowShortcutsThrough(QWidget* window) {
  QObject* filter =
      window->findChild<QObject*>(QLatin1String(kFilterName), Qt::FindDirectChildrenOnly);
  if (filter == nullptr) {
    filter = new PassThrough(window);
    filter->setObjectName(QLatin1String(kFilterName));
  }
  for (QLineEdit* edit : window->findChildren<QLineEdit*>()) {
    edit->removeEventFilter(filter);
    edit->installEventFilter(filter);
  }
}

}  // namespace attnscope
