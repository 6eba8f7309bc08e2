// The Help menu (DESIGN §6): a sheet of every keyboard shortcut of the window's menus and the
// heatmap's mouse gestures (F1), and About attnscope (versions of attnscope, Qt, QCustomPlot
// and HDF5, and how it was built).
#pragma once

#include <QObject>
#include <QString>

class QMainWindow;
class QMenu;

namespace attnscope {

class HelpMenu : public QObject {
  Q_OBJECT

 public:
  explicit HelpMenu(QMainWindow* window);

  QMenu* menu() const { return menu_; }
  // The shortcut sheet as shown: one "keys<TAB>menu: action" line per shortcut, then the
  // mouse gestures.
  QString shortcutSheet() const;
  QString aboutText() const;

  void showShortcuts();
  void showAbout();

 private:
  QMainWindow* window_;
  QMenu* menu_ = nullptr;
};

}  // namespace attnscope
