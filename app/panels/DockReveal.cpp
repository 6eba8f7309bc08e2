// Finding and raising the dock of a panel (see DockReveal.h).
#include "app/panels/DockReveal.h"

#include <QDockWidget>

namespace attnscope {

QDockWidget* dockOf(QWidget* panel) {
  for (QWidget* w = panel; w; w = w->parentWidget()) {
    if (auto* dock = qobject_cast<QDockWidget*>(w)) return dock;
  }
  return nullptr;
}

void revealDock(QWidget* panel) {
  if (QDockWidget* dock = dockOf(panel)) {
    dock->show();
    dock->raise();
  }
}

}  // namespace attnscope
