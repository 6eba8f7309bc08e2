// Case-level background computations behind the findings list, the overview heatmaps, the
// timeline and the sweep view: the case summary (analyze_case at the current settings), the
// metrics of every (step, layer) case of the file (of every rank's file for a run folder), and
// the softmax-scale sweep. Each runs on
// its own TaskRunner (latest wins, progress, cancel) and only when its inputs changed; the
// sweep only while enabled (its dock is visible). Every job polls its TaskControl between units
// (cases, analysis phases, sweep runs), so a cancel or a newer request stops the CPU work
// within one unit, not just the delivery of the result.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/analysis/scale_sweep.h"
#include "core/view/case_summary.h"

class QTimer;

namespace attnscope {

class DumpReader;
class SessionContext;
class TaskRunner;

// Metrics of each case of a file that carries step / layer attributes, or of every rank's file
// of a run folder. Cases fill in as the series job finishes them (pending until then); a case
// that cannot be read or computed (or a group the reader rejected or found broken) is an error
// with its message.
enum class SeriesState : uint8_t { pending, done, error };
struct SeriesCase {
  std::string path;
  int64_t step = 0, layer = 0;
  SeriesState state = SeriesState::pending;
  double metrics[kMetricCount] = {};  // HeadMetrics::aggregate per Metric (done)
  std::string error;                  // why (error)
  int file = -1;                      // the open file (SessionContext) it is a case of
  int64_t rank = -1;                  // that file's rank in its run folder; -1 on its own
};
struct SeriesResult {
  // In file order (rank, then step, then layer), then unreadable ones.
  std::vector<SeriesCase> cases;
  std::vector<int64_t> steps, layers;  // distinct values, ascending
  std::vector<int64_t> ranks;          // distinct ranks of a run folder; empty for one file
  int done = 0;                        // cases no longer pending
};

// The error cells a dump's unreadable cases and rejected groups give (see the .cpp).
std::vector<SeriesCase> unreadableCases(const DumpReader& reader);

// Work counters shared with the running jobs (written on worker threads).
struct AnalysisCounters {
  std::atomic<int> running{0};        // jobs executing on a worker thread right now
  std::atomic<int> casesAnalysed{0};  // cases whose metrics any series job computed, ever
  std::atomic<int> seriesTotal{0};    // cases of the latest series job
};

class AnalysisController : public QObject {
  Q_OBJECT

 public:
  explicit AnalysisController(SessionContext* context, QObject* parent = nullptr);

  std::shared_ptr<const CaseSummary> summary() const { return summary_; }
  // The summary was computed for the selected case at the settings now in effect (false
  // from a settings or case change until the new summary is in).
  bool summaryCurrent() const;
  std::shared_ptr<const SeriesResult> series() const { return series_; }
  std::shared_ptr<const ScaleSweep> sweep() const { return sweep_; }
  TaskRunner* summaryRunner() const { return summaryRunner_; }
  TaskRunner* seriesRunner() const { return seriesRunner_; }
  TaskRunner* sweepRunner() const { return sweepRunner_; }

  // Jobs still computing on a worker thread (a cancelled job counts until it has stopped).
  int runningJobs() const { return counters_->running.load(); }
  int casesAnalysed() const { return counters_->casesAnalysed.load(); }
  int seriesTotal() const { return counters_->seriesTotal.load(); }
  // Some job was submitted and has not delivered or been cancelled.
  bool busy() const;

  void setSweepEnabled(bool enabled);
  // Stops every job (they return at their next poll) and forgets what was computed for, so
  // that rescan() starts them again.
  void cancelAll();
  // Starts the analyses the current selection and settings need, now (no debounce).
  void rescan();

 signals:
  void busyChanged(bool busy);
  // Cases of the series done (the partial series() holds them) of total.
  void seriesProgress(int done, int total);
  void cancelled();
  void summaryChanged();
  void seriesChanged();
  void sweepChanged();
  void failed(const QString& what, const QString& message);

 private:
  void refresh();
  void startSummary(const std::string& key);
  void startSeries(const std::string& key);
  void startSweep(const std::string& key);
  void showSeriesProgress();
  SummarySettings summarySettings() const;
  // "file|case|settings" of the summary the current selection needs; empty without a case.
  std::string summaryKey() const;

  SessionContext* context_;
  TaskRunner* summaryRunner_ = nullptr;
  TaskRunner* seriesRunner_ = nullptr;
  TaskRunner* sweepRunner_ = nullptr;
  std::shared_ptr<const CaseSummary> summary_;
  std::string summaryAppliedKey_;  // summaryKey() summary_ was computed for
  std::shared_ptr<const SeriesResult> series_;
  // The running series job's cases so far (shared with it; copied to series_ on progress).
  struct SeriesProgress;
  std::shared_ptr<SeriesProgress> seriesProgress_;
  QElapsedTimer partialShown_;
  std::shared_ptr<const ScaleSweep> sweep_;
  std::string summaryKey_, seriesKey_, sweepKey_;
  bool sweepEnabled_ = false;
  QTimer* debounce_ = nullptr;
  std::shared_ptr<AnalysisCounters> counters_ = std::make_shared<AnalysisCounters>();
};

}  // namespace attnscope
