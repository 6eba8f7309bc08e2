// Health page (issue 45): the recorder's attention statistics of the selected dump over its
// training steps (core/analysis/health.h). A step x (layer, head) map of a chosen quantity
// (headroom = log10(limit / max |logit|) by default: how far each head's scores are from the
// limit of its kernel's precision), the warnings and notices (a click selects the head), and
// the selected head's max |logit| over the steps on a log scale with its limit, the fitted
// trend and band up to the predicted crossing, the first warning and the first non-finite
// step. A click on a map cell selects that head and opens that step's case of its layer when
// the dump holds one (of a drawn cell pooling several steps, the latest with one); a double
// click on a warning opens the case of its step. Read and fitted
// on a background thread; reloaded when a live dump grows.
#pragma once

#include <QString>
#include <QWidget>
#include <memory>
#include <vector>

#include "core/analysis/health.h"
#include "core/view/matrix_grid.h"

class QComboBox;
class QLabel;
class QListWidget;

namespace attnscope {

class HeatmapView;
class SessionContext;
class TaskRunner;
class TrendPlotView;

// What the map shows per (step, head).
enum class HealthMetric {
  headroom,
  max_abs_logit,
  mean_entropy,
  dominant_share,
  min_lse,
  norm_dq,
  norm_dk,
  norm_dv,
  norm_do,
  nonfinite
};

class HealthPanel : public QWidget {
  Q_OBJECT

 public:
  HealthPanel(SessionContext* context, QWidget* parent = nullptr);

  // Reads the statistics of open file `index` (nothing when it is the one shown and unchanged).
  void showFile(int index);
  void setMetric(HealthMetric metric);
  void selectSeries(int series);

  const HealthReport* report() const { return report_.get(); }
  int selectedSeries() const { return selected_; }
  HeatmapView* map() const { return map_; }
  TrendPlotView* trend() const { return trend_; }
  QListWidget* warningList() const { return warnings_; }
  QString note() const;

 signals:
  void loaded();  // a report (or the reason there is none) is shown

 private:
  void load(const QString& path);
  void showReport();
  void showMap();
  void showTrend();
  void onCellClicked(const CellReadout& cell);
  // Selects the case of `step` and `layer` in the shown file; false when none was recorded.
  bool openCase(int64_t step, int64_t layer);

  SessionContext* context_;
  TaskRunner* runner_;
  QString path_;  // the file whose statistics are shown or loading
  std::shared_ptr<const HealthReport> report_;
  std::vector<int64_t> steps_;  // map rows: every step of any series, ascending
  HealthMetric metric_ = HealthMetric::headroom;
  int selected_ = -1;
  QComboBox* metricBox_ = nullptr;
  QLabel* note_ = nullptr;
  HeatmapView* map_ = nullptr;
  QListWidget* warnings_ = nullptr;
  TrendPlotView* trend_ = nullptr;
};

}  // namespace attnscope
