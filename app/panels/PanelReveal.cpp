// Finding and raising the dock or page of a panel (see PanelReveal.h).
#include "app/panels/PanelReveal.h"

#include <QDockWidget>
#include <QTabWidget>

namespace attnscope {

void revealPanel(QWidget* panel) {
  for (QWidget* w = panel; w; w = w->parentWidget()) {
    if (auto* dock = qobject_cast<QDockWidget*>(w)) {
      dock->show();
      dock->raise();
      return;
    }
    // A page's parent is the tab widget's stack, whose parent is the tab widget.
    QWidget* stack = w->parentWidget();
    auto* tabs = qobject_cast<QTabWidget*>(stack ? stack->parentWidget() : nullptr);
    if (tabs && tabs->indexOf(w) >= 0) {
      tabs->setCurrentWidget(w);
      return;
    }
  }
}

}  // namespace attnscope
