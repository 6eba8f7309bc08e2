// Central panel: tabs of heatmaps for S, P, dP, dS (score-shaped, pooled for long sequences),
// O, dQ, dK, dV of the selected head and the O / dQ error against the fp64 reference. Feeds
// every view from the SessionContext's result, outlines the stepper's current tile on each,
// forwards hover and clicks to the inspector, zoom / resize to the context (recompute of the
// visible window), and shows a finding's location when the context asks.
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
  HeadView currentHeadView() const;
  // Makes a view's tab current.
  void showView(HeadView view);
  QTabWidget* tabs() const { return tabs_; }

 protected:
  void resizeEvent(QResizeEvent* event) override;

 private:
  void showResult();
  // A tab was shown: ask for the grids it needs.
  void onTabShown();
  void reportView();
  void showStepTile();
  void showFocus(const FocusTarget& target);
  void applyFocus();

  SessionContext* context_;
  QTabWidget* tabs_ = nullptr;
  QLabel* status_ = nullptr;
  QTimer* resizeTimer_ = nullptr;
  std::map<HeadView, HeatmapView*> views_;  // every HeadView
  std::optional<FocusTarget> pendingFocus_;
  QString shownKey_;  // case / batch / head of the result shown (a new one resets zoom)
};

}  // namespace attnscope
