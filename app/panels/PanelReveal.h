// Brings a panel to the front: the panel sits in a scroll area inside a QDockWidget
// (MainWindow::addPanelDock) or a page of a QTabWidget (MainWindow::addPage), found among its
// ancestors.
#pragma once

class QWidget;

namespace attnscope {

// Shows the dock holding `panel` and raises it over the docks tabbed with it, or makes the page
// holding it the current one.
void revealPanel(QWidget* panel);

}  // namespace attnscope
