// The compare view (DESIGN §5, issue 15 item 6), shown in place of the heatmap tabs: one view
// (S, P, dP, dS, O, dQ, dK, dV) of the selected head in two runs side by side, A as the controls
// set it and B with one thing changed (the other kernel mode, another precision or backend, or
// the dump's recorded outputs), zoomed together, and a difference tab A - B whose overlay marks
// where only one run is non-finite. A line sums up where they disagree. The runs come from the
// CompareController.
#pragma once

#include <QWidget>

#include "core/view/head_view.h"
#include "core/view/matrix_grid.h"

class QComboBox;
class QLabel;
class QSplitter;
class QTabWidget;
class QToolButton;

namespace attnscope {

class CompareController;
class HeatmapView;
class SessionContext;

class ComparePanel : public QWidget {
  Q_OBJECT

 public:
  ComparePanel(SessionContext* context, CompareController* compare, QWidget* parent = nullptr);

  QComboBox* viewBox() const { return viewBox_; }
  QComboBox* withBox() const { return withBox_; }
  QTabWidget* tabs() const { return tabs_; }
  HeatmapView* runA() const { return a_; }
  HeatmapView* runB() const { return b_; }
  HeatmapView* difference() const { return diff_; }
  // "B: fp16 unfused · max |A - B| 3.2e-03 at (12, 40) · 65 cells non-finite in B only".
  QString summary() const;

 signals:
  // The user asked to go back to the heatmap tabs.
  void closeRequested();

 protected:
  void showEvent(QShowEvent* event) override;
  void hideEvent(QHideEvent* event) override;

 private:
  void buildViews(HeadView view);
  void fillWithBox();
  void onWithChosen(int index);
  void showComparison();
  // One view zoomed or panned: the others follow and the runs are recomputed for the window.
  void syncZoom(HeatmapView* from, const MatrixWindow& window);

  SessionContext* context_;
  CompareController* compare_;
  QComboBox* viewBox_ = nullptr;
  QComboBox* withBox_ = nullptr;
  QLabel* summary_ = nullptr;
  QToolButton* close_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  QSplitter* sideBySide_ = nullptr;
  HeatmapView* a_ = nullptr;
  HeatmapView* b_ = nullptr;
  HeatmapView* diff_ = nullptr;
  bool syncing_ = false;
  QString shownKey_;  // case / batch / head / view of the grids shown (a new one resets zoom)
};

}  // namespace attnscope
