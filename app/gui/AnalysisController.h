// Case-level background computations behind the findings list, the overview heatmaps, the
// timeline and the sweep view: the case summary (analyze_case at the current settings), the
// metrics of every (step, layer) case of the file, and the softmax-scale sweep. Each runs on
// its own TaskRunner (latest wins, progress, cancel) and only when its inputs changed; the
// sweep only while enabled (its dock is visible).
#pragma once

#include <QObject>
#include <memory>
#include <string>
#include <vector>

#include "app/gui/CaseSummary.h"
#include "core/analysis/scale_sweep.h"

class QTimer;

namespace attnscope {

class SessionContext;
class TaskRunner;

// Metrics of each case of a file that carries step / layer attributes.
struct SeriesCase {
  std::string path;
  int64_t step = 0, layer = 0;
  double metrics[5] = {};  // HeadMetrics::aggregate per Metric
};
struct SeriesResult {
  std::vector<SeriesCase> cases;       // in file order (step, then layer)
  std::vector<int64_t> steps, layers;  // distinct values, ascending
};

class AnalysisController : public QObject {
  Q_OBJECT

 public:
  explicit AnalysisController(SessionContext* context, QObject* parent = nullptr);

  std::shared_ptr<const CaseSummary> summary() const { return summary_; }
  std::shared_ptr<const SeriesResult> series() const { return series_; }
  std::shared_ptr<const ScaleSweep> sweep() const { return sweep_; }
  TaskRunner* summaryRunner() const { return summaryRunner_; }
  TaskRunner* seriesRunner() const { return seriesRunner_; }
  TaskRunner* sweepRunner() const { return sweepRunner_; }

  void setSweepEnabled(bool enabled);
  void cancelAll();

 signals:
  void summaryChanged();
  void seriesChanged();
  void sweepChanged();
  void failed(const QString& what, const QString& message);

 private:
  void refresh();
  void startSummary(const std::string& key);
  void startSeries(const std::string& key);
  void startSweep(const std::string& key);
  SummarySettings summarySettings() const;

  SessionContext* context_;
  TaskRunner* summaryRunner_ = nullptr;
  TaskRunner* seriesRunner_ = nullptr;
  TaskRunner* sweepRunner_ = nullptr;
  std::shared_ptr<const CaseSummary> summary_;
  std::shared_ptr<const SeriesResult> series_;
  std::shared_ptr<const ScaleSweep> sweep_;
  std::string summaryKey_, seriesKey_, sweepKey_;
  bool sweepEnabled_ = false;
  QTimer* debounce_ = nullptr;
};

}  // namespace attnscope
