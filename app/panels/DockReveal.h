// Brings a panel's dock to the front: the panel sits in a scroll area inside its QDockWidget
// (MainWindow::addPanelDock), so the dock is found among its ancestors.
#pragma once

class QDockWidget;
class QWidget;

namespace attnscope {

// The dock holding `panel` (nullptr when it is not docked).
QDockWidget* dockOf(QWidget* panel);
// Shows the dock holding `panel` and raises it over the docks tabbed with it.
void revealDock(QWidget* panel);

}  // namespace attnscope
