// Overview dock (DESIGN §5, §6): a chosen metric (non-finite count, max |S|, min LSE, max row
// max, ||dQ||, ||dK||, ||dV||, ||(dQ,dK,dV)||) as a (batch x head) heatmap of the selected case
// and, for dumps with step / layer attributes, a (step x layer) heatmap that fills in as cases
// finish (grey until then; a case that cannot be analysed is a red "error" cell whose tooltip
// says why) and a timeline plot (metric against step, one line per layer). For a run folder the
// (step x layer) map has the steps of every rank, one outlined block of rows per rank, and the
// timeline shows the selected rank. Clicking a head cell selects that head; clicking a
// (step, layer) cell opens that case (of that rank). The current head and case are
// outlined. While the case analyses run, a progress bar (cases of the whole-dump series) and Cancel
// (Esc) show; after a cancel, Rescan restarts them.
#pragma once

#include <QMap>
#include <QPair>
#include <QWidget>

#include "core/view/case_summary.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QToolButton;

namespace attnscope {

class AnalysisController;
class HeatmapView;
class RowPlotView;
class SessionContext;

class OverviewPanel : public QWidget {
  Q_OBJECT

 public:
  OverviewPanel(SessionContext* context, AnalysisController* analysis, QWidget* parent = nullptr);

  void setMetric(Metric metric);
  Metric metric() const { return metric_; }
  HeatmapView* headMap() const { return headMap_; }
  HeatmapView* seriesMap() const { return seriesMap_; }
  RowPlotView* timeline() const { return timeline_; }
  QProgressBar* scanProgress() const { return progress_; }
  QToolButton* cancelButton() const { return cancel_; }
  QToolButton* rescanButton() const { return rescan_; }
  // The error of the case shown at (step row, layer column) of the (step x layer) map (its
  // tooltip); empty for a finished or pending case.
  QString seriesError(int64_t row, int64_t col) const;

 private:
  void showHeads();
  void showSeries();
  void onSeriesClicked(int64_t row, int64_t col);
  void onBusyChanged(bool busy);

  SessionContext* context_;
  AnalysisController* analysis_;
  Metric metric_ = Metric::nonfinite;
  QComboBox* metricBox_ = nullptr;
  QLabel* seriesNote_ = nullptr;
  HeatmapView* headMap_ = nullptr;
  HeatmapView* seriesMap_ = nullptr;
  RowPlotView* timeline_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QToolButton* cancel_ = nullptr;
  QToolButton* rescan_ = nullptr;
  QMap<QPair<int64_t, int64_t>, QString> seriesErrors_;  // by (row, col) of the series map
};

}  // namespace attnscope
