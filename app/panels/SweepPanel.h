// Sweep dock (issue 5 item 3): the selected case recomputed over log-spaced softmax scales at
// fp32, fp16 and bf16 in the current mode; plots of the non-finite count and of max |S| against
// the scale, one line per precision, with the current scale marked and each precision's finite
// range listed. Computed in the background while its dock is visible (the main window enables
// it through AnalysisController::setSweepEnabled).
#pragma once

#include <QWidget>

class QLabel;

namespace attnscope {

class AnalysisController;
class RowPlotView;
class SessionContext;

class SweepPanel : public QWidget {
  Q_OBJECT

 public:
  SweepPanel(SessionContext* context, AnalysisController* analysis, QWidget* parent = nullptr);

  RowPlotView* nonfinitePlot() const { return nonfinite_; }
  RowPlotView* maxScorePlot() const { return maxScore_; }
  QString rangesText() const;

 private:
  void showSweep();

  SessionContext* context_;
  AnalysisController* analysis_;
  QLabel* ranges_ = nullptr;
  RowPlotView* nonfinite_ = nullptr;
  RowPlotView* maxScore_ = nullptr;
};

}  // namespace attnscope
