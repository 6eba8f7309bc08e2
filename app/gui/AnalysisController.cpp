// Background case summary, (step x layer) series and scale sweep (see AnalysisController.h).
#include "app/gui/AnalysisController.h"

#include <QTimer>
#include <algorithm>

#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"

namespace attnscope {
namespace {

constexpr int kDebounceMs = 250;

std::string settingsKey(const SummarySettings& s) {
  return std::to_string(static_cast<int>(*s.run.precision)) + "|" +
         (s.run.scale ? std::to_string(*s.run.scale) : std::string("default")) + "|" +
         std::to_string(static_cast<int>(s.run.mask_fill)) + "|" +
         std::to_string(static_cast<int>(s.mode)) + "|" +
         (s.clip_norm ? std::to_string(*s.clip_norm) : std::string("noclip"));
}

// Counts a job as running for as long as it executes on its worker thread.
class RunningGuard {
 public:
  explicit RunningGuard(std::atomic<int>& n) : n_(n) { ++n_; }
  ~RunningGuard() { --n_; }
  RunningGuard(const RunningGuard&) = delete;
  RunningGuard& operator=(const RunningGuard&) = delete;

 private:
  std::atomic<int>& n_;
};

std::vector<int64_t> distinct(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

AnalysisController::AnalysisController(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context) {
  summaryRunner_ =
      new TaskRunner(QStringLiteral("attnscope-analysis"), QThread::IdlePriority, this);
  seriesRunner_ = new TaskRunner(QStringLiteral("attnscope-series"), QThread::IdlePriority, this);
  sweepRunner_ = new TaskRunner(QStringLiteral("attnscope-sweep"), QThread::IdlePriority, this);
  connect(summaryRunner_, &TaskRunner::failed, this,
          [this](const QString& m) { emit failed(tr("Case analysis"), m); });
  connect(seriesRunner_, &TaskRunner::failed, this,
          [this](const QString& m) { emit failed(tr("Step x layer overview"), m); });
  connect(sweepRunner_, &TaskRunner::failed, this,
          [this](const QString& m) { emit failed(tr("Scale sweep"), m); });
  for (TaskRunner* r : {summaryRunner_, seriesRunner_, sweepRunner_}) {
    connect(r, &TaskRunner::busyChanged, this, [this] { emit busyChanged(busy()); });
  }
  connect(seriesRunner_, &TaskRunner::progress, this, &AnalysisController::seriesProgress);
  // Coalesces bursts (a slider drag) into one analysis of the settings the user stops at.
  debounce_ = new QTimer(this);
  debounce_->setSingleShot(true);
  debounce_->setInterval(kDebounceMs);
  connect(debounce_, &QTimer::timeout, this, &AnalysisController::refresh);
  connect(context_, &SessionContext::inputsChanged, debounce_, qOverload<>(&QTimer::start));
}

void AnalysisController::setSweepEnabled(bool enabled) {
  if (enabled == sweepEnabled_) return;
  sweepEnabled_ = enabled;
  if (enabled) {
    refresh();
  } else {
    sweepRunner_->cancel();  // a hidden sweep's result is not wanted
    sweepKey_.clear();
  }
}

bool AnalysisController::busy() const {
  return summaryRunner_->busy() || seriesRunner_->busy() || sweepRunner_->busy();
}

void AnalysisController::cancelAll() {
  debounce_->stop();
  for (TaskRunner* r : {summaryRunner_, seriesRunner_, sweepRunner_}) r->cancel();
  summaryKey_.clear();
  seriesKey_.clear();
  sweepKey_.clear();
  emit cancelled();
}

void AnalysisController::rescan() {
  debounce_->stop();
  refresh();
}

SummarySettings AnalysisController::summarySettings() const {
  SummarySettings s;
  const std::optional<HeadRequest> r = context_->currentRequest();
  if (r) s.run = r->settings;
  s.mode = context_->settings().mode;
  s.clip_norm = context_->settings().clipNorm;
  return s;
}

void AnalysisController::refresh() {
  const std::shared_ptr<const DumpReader> reader = context_->reader();
  if (!reader || context_->caseInfo() == nullptr) return;
  const SummarySettings s = summarySettings();
  const std::string file = reader->path();
  const std::string casePath = context_->casePath().toStdString();
  const std::string summaryKey = file + "|" + casePath + "|" + settingsKey(s);
  if (summaryKey != summaryKey_) startSummary(summaryKey);
  const std::string seriesKey = file + "|" + settingsKey(s);
  if (seriesKey != seriesKey_) startSeries(seriesKey);
  const std::string sweepKey = file + "|" + casePath + "|" +
                               std::to_string(static_cast<int>(s.run.mask_fill)) + "|" +
                               std::to_string(static_cast<int>(s.mode));
  if (sweepEnabled_ && sweepKey != sweepKey_) startSweep(sweepKey);
}

void AnalysisController::startSummary(const std::string& key) {
  summaryKey_ = key;
  const auto reader = context_->reader();
  const std::string casePath = context_->casePath().toStdString();
  const SummarySettings s = summarySettings();
  summaryRunner_->submit(
      [reader, casePath, s, counters = counters_](const TaskControl& control,
                                                  QString* error) -> TaskResult {
        const RunningGuard running(counters->running);
        Result<CaseData> data = reader->load(casePath);
        if (!data) {
          *error = QString::fromStdString(data.error().describe());
          return nullptr;
        }
        SummarySettings settings = s;
        settings.cancelled = [&control] { return control.stale(); };
        Result<CaseSummary> summary = summarize_case(*data, settings);
        if (control.stale()) return nullptr;
        if (!summary) {
          *error = QString::fromStdString(summary.error().describe());
          return nullptr;
        }
        return std::make_shared<const CaseSummary>(std::move(summary).value());
      },
      [this](TaskResult r) {
        summary_ = std::static_pointer_cast<const CaseSummary>(r);
        emit summaryChanged();
      });
}

void AnalysisController::startSeries(const std::string& key) {
  seriesKey_ = key;
  const auto reader = context_->reader();
  std::vector<CaseInfo> cases;
  for (const CaseInfo& c : reader->cases()) {
    if (c.config.step) cases.push_back(c);
  }
  if (cases.size() < 2) {
    series_.reset();
    emit seriesChanged();
    return;
  }
  const SummarySettings s = summarySettings();
  counters_->seriesTotal.store(static_cast<int>(cases.size()));
  seriesRunner_->submit(
      [reader, cases, s, counters = counters_](const TaskControl& control,
                                               QString* error) -> TaskResult {
        const RunningGuard running(counters->running);
        SummarySettings settings = s;
        settings.cancelled = [&control] { return control.stale(); };
        auto out = std::make_shared<SeriesResult>();
        std::vector<int64_t> steps, layers;
        for (size_t i = 0; i < cases.size(); ++i) {
          if (control.stale()) return nullptr;
          control.report(static_cast<int>(i), static_cast<int>(cases.size()));
          const CaseInfo& c = cases[i];
          Result<CaseData> data = reader->load(c.path);
          if (!data) {
            *error = QString::fromStdString(data.error().describe());
            return nullptr;
          }
          Result<HeadMetrics> m = case_metrics(*data, settings);
          if (control.stale()) return nullptr;
          ++counters->casesAnalysed;
          if (!m) {
            *error = QString::fromStdString(m.error().describe());
            return nullptr;
          }
          SeriesCase sc{c.path, *c.config.step, c.config.layer.value_or(0), {}};
          for (Metric metric : kAllMetrics) {
            sc.metrics[static_cast<int>(metric)] = m->aggregate(metric);
          }
          steps.push_back(sc.step);
          layers.push_back(sc.layer);
          out->cases.push_back(std::move(sc));
        }
        control.report(static_cast<int>(cases.size()), static_cast<int>(cases.size()));
        out->steps = distinct(steps);
        out->layers = distinct(layers);
        return std::shared_ptr<const SeriesResult>(out);
      },
      [this](TaskResult r) {
        series_ = std::static_pointer_cast<const SeriesResult>(r);
        emit seriesChanged();
      });
}

void AnalysisController::startSweep(const std::string& key) {
  sweepKey_ = key;
  const auto reader = context_->reader();
  const std::string casePath = context_->casePath().toStdString();
  SweepSettings s;
  s.run.mask_fill = context_->settings().maskFill;
  s.modes = {context_->settings().mode};
  s.points = 21;
  sweepRunner_->submit(
      [reader, casePath, s, counters = counters_](const TaskControl& control,
                                                  QString* error) -> TaskResult {
        const RunningGuard running(counters->running);
        Result<CaseData> data = reader->load(casePath);
        if (!data) {
          *error = QString::fromStdString(data.error().describe());
          return nullptr;
        }
        SweepSettings settings = s;
        settings.cancelled = [&control] { return control.stale(); };
        Result<ScaleSweep> sweep = scale_sweep(*data, settings);
        if (control.stale()) return nullptr;
        if (!sweep) {
          *error = QString::fromStdString(sweep.error().describe());
          return nullptr;
        }
        return std::make_shared<const ScaleSweep>(std::move(sweep).value());
      },
      [this](TaskResult r) {
        sweep_ = std::static_pointer_cast<const ScaleSweep>(r);
        emit sweepChanged();
      });
}

}  // namespace attnscope
