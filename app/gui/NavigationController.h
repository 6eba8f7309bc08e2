// The Navigate menu: Ctrl+G "go to (row, col)" of a heatmap (asks the heatmaps, through the
// SessionContext, to zoom around the cell and pin it in the inspector), Home the whole matrix
// of the tab in front, and moving through a multi-step dump: Alt+Right / Alt+Left the same layer
// in the next / previous training step, Alt+Down / Alt+Up the next / previous layer of the same
// step.
#pragma once

#include <QObject>

#include "core/view/head_view.h"

class QAction;
class QMenu;
class QWidget;

namespace attnscope {

class SessionContext;

// A cell of one heatmap tab at one (batch, head): row / col are element indices of that
// matrix (head_view_shape).
struct CellTarget {
  HeadView view = HeadView::s;
  int64_t batch = 0, head = 0, row = 0, col = 0;
};

class NavigationController : public QObject {
  Q_OBJECT

 public:
  NavigationController(SessionContext* context, QWidget* window);

  QMenu* menu() const { return menu_; }

  // Checks the target against the open case; an empty string when it is valid, else the
  // message shown to the user ("row 200 is out of range for S: rows 0-127 (Sq = 128)").
  QString validate(const CellTarget& target) const;
  // Selects the target's batch / head and tab, zooms the heatmap around the cell and, once the
  // cell is shown at full resolution, pins it in the inspector (SessionContext::showRegion).
  // False with `error` when the target is invalid.
  bool goToCell(const CellTarget& target, QString* error = nullptr);

  // Opens the go-to dialog (window-modal, not blocking), filled with the current position.
  void openGoToDialog();

  // The case in the neighbouring training step (dStep = +-1, same layer) or layer (dLayer =
  // +-1, same step) of the current one; empty when there is none.
  QString neighbourCase(int dStep, int dLayer) const;
  // Selects that case; false (with a status notice) when there is none.
  bool moveInSeries(int dStep, int dLayer);

 signals:
  // Something to show in the status bar.
  void notice(const QString& message);

 private:
  void buildMenu(QWidget* window);
  void updateActions();

  SessionContext* context_;
  QMenu* menu_ = nullptr;
  QAction* nextStep_ = nullptr;
  QAction* previousStep_ = nullptr;
  QAction* nextLayer_ = nullptr;
  QAction* previousLayer_ = nullptr;
};

}  // namespace attnscope
