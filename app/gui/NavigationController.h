// The Navigate menu: Ctrl+G "go to (row, col)" of a heatmap (pins the cell in the inspector
// and zooms the heatmap around it), Home the whole matrix of the shown heatmap, showing a region
// of a view at a (batch, head) once its result is there (used by the annotation list and the
// restored zoom), and moving through a multi-step dump: Alt+Right / Alt+Left the same layer in
// the next / previous training step, Alt+Down / Alt+Up the next / previous layer of the same
// step.
#pragma once

#include <QObject>
#include <optional>

#include "core/view/head_view.h"
#include "core/view/matrix_grid.h"

class QAction;
class QMenu;
class QWidget;

namespace attnscope {

class HeatmapPanel;
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
  NavigationController(SessionContext* context, HeatmapPanel* heatmaps, QWidget* window);

  QMenu* menu() const { return menu_; }

  // Checks the target against the open case; an empty string when it is valid, else the
  // message shown to the user ("row 200 is out of range for S: rows 0-127 (Sq = 128)").
  QString validate(const CellTarget& target) const;
  // Selects the target's batch / head and tab, zooms the heatmap around the cell and, once the
  // cell is shown at full resolution, pins it in the inspector. False with `error` when the
  // target is invalid.
  bool goToCell(const CellTarget& target, QString* error = nullptr);
  bool pending() const { return pending_.has_value(); }

  // Opens the go-to dialog (window-modal, not blocking), filled with the current position.
  void openGoToDialog();

  // The case in the neighbouring training step (dStep = +-1, same layer) or layer (dLayer =
  // +-1, same step) of the current one; empty when there is none.
  QString neighbourCase(int dStep, int dLayer) const;
  // Selects that case; false (with a status notice) when there is none.
  bool moveInSeries(int dStep, int dLayer);

 signals:
  // A cell reached by goToCell is shown and pinned.
  void cellReached(const attnscope::CellReadout& readout);
  // Something to show in the status bar.
  void notice(const QString& message);

 private:
  // SessionContext::regionRequested: selects (batch, head) and `view` now and zooms to
  // `window` once the result of that head is shown. A later request replaces a pending one.
  void showRegion(HeadView view, int64_t batch, int64_t head, const MatrixWindow& window);
  struct Pending {
    HeadView view;
    QString casePath;
    int64_t batch = 0, head = 0;
    MatrixWindow window;
    std::optional<std::pair<int64_t, int64_t>> cell;  // (row, col) to pin
    bool zoomed = false;
  };
  void buildMenu(QWidget* window);
  void updateActions();
  void start(const Pending& pending);
  void applyPending();

  SessionContext* context_;
  HeatmapPanel* heatmaps_;
  std::optional<Pending> pending_;
  QMenu* menu_ = nullptr;
  QAction* nextStep_ = nullptr;
  QAction* previousStep_ = nullptr;
  QAction* nextLayer_ = nullptr;
  QAction* previousLayer_ = nullptr;
};

}  // namespace attnscope
