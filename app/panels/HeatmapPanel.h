// Central panel: tabs of heatmaps for S, P, dP, dS (score-shaped, pooled for long sequences),
// O, dQ, dK, dV of the selected head and the O / dQ error against the fp64 reference. Feeds
// every view from the SessionContext's result, outlines the stepper's current tile on each,
// forwards hover and clicks to the inspector, zoom / resize to the context (recompute of the
// visible window), draws the AnnotationBoard's annotations and reports the user's, and carries
// out the context's requests: the tab in front, a tab's zoom and colours, and a region to show
// (and a cell to pin) once its head's result is there. The tab in front, zooms and colour
// choices are reported back to the context.
#pragma once

#include <QWidget>
#include <map>
#include <optional>

#include "app/gui/SessionContext.h"
#include "core/view/head_view.h"

class QLabel;
class QTabWidget;
class QTimer;

namespace attnscope {

class HeatmapView;
class SessionContext;

class HeatmapPanel : public QWidget {
  Q_OBJECT

 public:
  explicit HeatmapPanel(SessionContext* context, QWidget* parent = nullptr);

  HeatmapView* view(HeadView view) const { return views_.at(view); }
  HeatmapView* currentView() const;
  QTabWidget* tabs() const { return tabs_; }
  // A region asked for (SessionContext::showRegion) is not fully shown yet: its head's result,
  // its zoom or the full-resolution value of its pinned cell is still to come.
  bool regionPending() const { return pending_.has_value(); }

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void showResult();
  // A tab was shown: report it and ask for the grids it needs.
  void onTabShown();
  void reportView();
  void showStepTile();
  void showAnnotations();
  void showRegion(const RegionRequest& request);
  void applyRegion();
  void zoom(HeadView view, const MatrixWindow& window);

  // A region being shown (showRegion) and how far.
  struct PendingRegion {
    RegionRequest request;
    QString casePath;
    bool zoomed = false;
  };

  SessionContext* context_;
  QTabWidget* tabs_ = nullptr;
  QLabel* status_ = nullptr;
  QTimer* resizeTimer_ = nullptr;
  std::map<HeadView, HeatmapView*> views_;  // every HeadView
  std::optional<PendingRegion> pending_;
  QString shownKey_;  // case / batch / head of the result shown (a new one resets zoom)
};

}  // namespace attnscope
