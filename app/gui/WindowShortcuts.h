// Window shortcuts that work whatever widget has the keyboard focus (DESIGN §6): a one-line text
// field asks to keep some Ctrl combinations for itself (Ctrl+E moves to the end of the line on
// X11), which silently disables the window's action of the same keys. The filter below lets
// those reach the window unless they are a text-editing key (copy, paste, undo, select all,
// word moves and deletes), which the field keeps.
#pragma once

#include <QObject>

class QKeyEvent;
class QWidget;

namespace attnscope {

// True when `key` is a Ctrl (or Alt) combination a text field does not need for editing.
bool windowShortcutWins(const QKeyEvent& key);

// Installs the filter on every QLineEdit under `window` (those created later are not covered:
// call again after adding some).
void letWindowShortcutsThrough(QWidget* window);

}  // namespace attnscope
