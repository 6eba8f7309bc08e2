// Background case summary, (step x layer) series and scale sweep (see AnalysisController.h).
#include "app/gui/AnalysisController.h"

#include <QTimer>
#include <algorithm>
#include <cctype>
#include <mutex>

#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"

namespace attnscope {
namespace {

constexpr int kDebounceMs = 250;
constexpr int kPartialMs = 250;  // partial (step x layer) results are shown this often

std::string settingsKey(const SummarySettings& s) {
  return choice_key(s.run);
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

// Numbers in a group path, in order ("/step_003/layer_01" -> 3, 1).
std::vector<int64_t> pathNumbers(const std::string& path) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < path.size();) {
    if (!std::isdigit(static_cast<unsigned char>(path[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < path.size() && std::isdigit(static_cast<unsigned char>(path[j]))) ++j;
    out.push_back(std::stoll(path.substr(i, std::min<size_t>(j - i, 18))));
    i = j;
  }
  return out;
}

}  // namespace

// Error cells of the (step x layer) overview: broken cases (the probe could not read their
// data) with their step / layer, and rejected groups whose path numbers give them, when every
// case with step / layer attributes carries exactly those as its path's last two numbers.
std::vector<SeriesCase> unreadableCases(const DumpReader& reader) {
  std::vector<SeriesCase> out;
  for (const BrokenCase& b : reader.broken()) {
    if (!b.info.config.step) continue;
    out.push_back({b.info.path,
                   *b.info.config.step,
                   b.info.config.layer.value_or(0),
                   SeriesState::error,
                   {},
                   b.error.describe()});
  }
  bool pathsCarrySteps = false;
  for (const CaseInfo& c : reader.cases()) {
    if (!c.config.step) continue;
    const std::vector<int64_t> n = pathNumbers(c.path);
    pathsCarrySteps = n.size() >= 2 && n[n.size() - 2] == *c.config.step &&
                      n.back() == c.config.layer.value_or(-1);
    if (!pathsCarrySteps) break;
  }
  const std::string prefix = reader.path() + ": ";
  for (const Error& e : reader.rejected()) {
    if (!pathsCarrySteps || e.message.rfind(prefix, 0) != 0) continue;
    // "FILE: /step_003/layer_01/mask: problem" -> the object "/step_003/layer_01/mask".
    const std::string object =
        e.message.substr(prefix.size(), e.message.find(": ", prefix.size()) - prefix.size());
    const std::vector<int64_t> n = pathNumbers(object);
    if (n.size() < 2) continue;
    out.push_back({object.substr(0, object.rfind('/')),
                   n[n.size() - 2],
                   n.back(),
                   SeriesState::error,
                   {},
                   e.describe()});
  }
  return out;
}

AnalysisController::AnalysisController(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context) {
  summaryRunner_ =
      new TaskRunner(QStringLiteral("attnscope-analysis"), TaskPriority::background, this);
  seriesRunner_ =
      new TaskRunner(QStringLiteral("attnscope-series"), TaskPriority::background, this);
  sweepRunner_ = new TaskRunner(QStringLiteral("attnscope-sweep"), TaskPriority::background, this);
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
  connect(seriesRunner_, &TaskRunner::progress, this, &AnalysisController::showSeriesProgress);
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
  if (seriesProgress_) {  // a cancelled series shows nothing, not a partial map
    seriesProgress_.reset();
    series_.reset();
    emit seriesChanged();
  }
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
  // The controls' own choice: what it leaves open replays each case's recorded run, all of
  // its modes (the findings are then those `attnscope-cli scan` gives).
  SummarySettings s;
  s.run = context_->choice();
  return s;
}

std::string AnalysisController::summaryKey() const {
  const std::shared_ptr<const DumpReader> reader = context_->reader();
  if (!reader || context_->caseInfo() == nullptr) return {};
  return reader->path() + "|" + context_->casePath().toStdString() + "|" +
         settingsKey(summarySettings());
}

bool AnalysisController::summaryCurrent() const {
  return summary_ && !summaryAppliedKey_.empty() && summaryAppliedKey_ == summaryKey();
}

void AnalysisController::refresh() {
  const std::shared_ptr<const DumpReader> reader = context_->reader();
  if (!reader || context_->caseInfo() == nullptr) return;
  const SummarySettings s = summarySettings();
  const std::string file = reader->path();
  const std::string casePath = context_->casePath().toStdString();
  const std::string summaryKey = this->summaryKey();
  if (summaryKey != summaryKey_) startSummary(summaryKey);
  std::string seriesFiles;  // the selected file, or every open rank of its run folder
  for (int f : context_->runFiles(context_->fileIndex())) {
    seriesFiles += context_->file(f).reader->path() + "|";
  }
  const std::string seriesKey = seriesFiles + settingsKey(s);
  if (seriesKey != seriesKey_) startSeries(seriesKey);
  const std::string sweepKey = file + "|" + casePath + "|" + choice_key(s.run);
  if (sweepEnabled_ && sweepKey != sweepKey_) startSweep(sweepKey);
}

void AnalysisController::startSummary(const std::string& key) {
  summaryKey_ = key;
  const auto cases = context_->cases();
  const std::string casePath = context_->casePath().toStdString();
  const SummarySettings s = summarySettings();
  // At the recorded run the dump scan needs the same summary: whoever comes first computes it.
  std::shared_ptr<SummaryStore> shared;
  if (s.run == RunChoice{}) shared = context_->file(context_->fileIndex()).summaries;
  summaryRunner_->submit<CaseSummary>(
      [cases, shared, casePath, s, counters = counters_](
          const TaskControl& control, QString* error) -> std::shared_ptr<const CaseSummary> {
        const RunningGuard running(counters->running);
        Result<std::shared_ptr<const CaseData>> data = cases->get(casePath);
        if (!data) {
          *error = QString::fromStdString(data.error().describe());
          return nullptr;
        }
        SummarySettings settings = s;
        const auto stale = [&control] { return control.stale(); };
        settings.cancelled = stale;
        const auto compute = [&] { return summarize_case(**data, settings); };
        const Result<std::shared_ptr<const CaseSummary>> summary =
            [&]() -> Result<std::shared_ptr<const CaseSummary>> {
          if (shared) return shared->get(casePath, compute, stale);
          Result<CaseSummary> made = compute();
          if (!made) return made.error();
          return std::make_shared<const CaseSummary>(std::move(made).value());
        }();
        if (control.stale()) return nullptr;
        if (!summary) {
          *error = QString::fromStdString(summary.error().describe());
          return nullptr;
        }
        return *summary;
      },
      [this, key](std::shared_ptr<const CaseSummary> r) {
        summary_ = std::move(r);
        summaryAppliedKey_ = key;
        emit summaryChanged();
        const std::shared_ptr<CaseCache> cases = context_->cases();
        if (summary_ && cases && cases->learn(summary_->case_path, summary_->inferred)) {
          context_->runInferred();
        }
      });
}

struct AnalysisController::SeriesProgress {
  std::mutex mutex;
  SeriesResult result;  // guarded by mutex while the job runs
};

void AnalysisController::startSeries(const std::string& key) {
  seriesKey_ = key;
  auto progress = std::make_shared<SeriesProgress>();
  SeriesResult& init = progress->result;
  // The cases to analyse, each with the case cache of its file.
  struct Work {
    std::shared_ptr<CaseCache> cache;
    std::string path;
  };
  std::vector<Work> cases;
  std::vector<SeriesCase> unreadable;
  std::vector<int64_t> ranks;
  for (int f : context_->runFiles(context_->fileIndex())) {
    const OpenDump& file = context_->file(f);
    const DumpReader& reader = *file.cases->reader();
    const int64_t rank = file.run.folder.isEmpty() ? -1 : file.run.rank;
    if (rank >= 0) ranks.push_back(rank);
    for (const CaseInfo& c : reader.cases()) {
      if (!c.config.step) continue;
      cases.push_back({file.cases, c.path});
      init.cases.push_back({c.path,
                            *c.config.step,
                            c.config.layer.value_or(0),
                            SeriesState::pending,
                            {},
                            {},
                            f,
                            rank});
    }
    for (SeriesCase& c : unreadableCases(reader)) {
      c.file = f;
      c.rank = rank;
      unreadable.push_back(std::move(c));
    }
  }
  if (cases.size() + unreadable.size() < 2) {
    seriesProgress_.reset();
    series_.reset();
    emit seriesChanged();
    return;
  }
  init.done = static_cast<int>(unreadable.size());
  std::vector<int64_t> steps, layers;
  for (SeriesCase& c : unreadable) init.cases.push_back(std::move(c));
  for (const SeriesCase& c : init.cases) {
    steps.push_back(c.step);
    layers.push_back(c.layer);
  }
  init.steps = distinct(steps);
  init.layers = distinct(layers);
  init.ranks = distinct(ranks);
  seriesProgress_ = progress;
  series_ = std::make_shared<const SeriesResult>(init);
  emit seriesChanged();
  const int total = static_cast<int>(init.cases.size());
  const SummarySettings s = summarySettings();
  counters_->seriesTotal.store(total);
  seriesRunner_->submit<SeriesResult>(
      [cases, s, total, progress, counters = counters_](
          const TaskControl& control, QString*) -> std::shared_ptr<const SeriesResult> {
        const RunningGuard running(counters->running);
        SummarySettings settings = s;
        settings.cancelled = [&control] { return control.stale(); };
        int done = total - static_cast<int>(cases.size());
        control.report(done, total);
        for (size_t i = 0; i < cases.size(); ++i) {
          if (control.stale()) return nullptr;
          // Keep::no: a walk over every case must not push the one on screen out of the cache.
          Result<std::shared_ptr<const CaseData>> data =
              cases[i].cache->get(cases[i].path, CaseCache::Keep::no);
          Result<HeadMetrics> m = data ? case_metrics(**data, settings) : data.error();
          if (control.stale()) return nullptr;
          ++counters->casesAnalysed;
          {
            const std::lock_guard<std::mutex> lock(progress->mutex);
            SeriesCase& c = progress->result.cases[i];
            c.state = m ? SeriesState::done : SeriesState::error;
            if (!m) c.error = m.error().describe();
            for (Metric metric : kAllMetrics) {
              c.metrics[static_cast<int>(metric)] = m ? m->aggregate(metric) : 0.0;
            }
            progress->result.done = ++done;
          }
          control.report(done, total);
        }
        const std::lock_guard<std::mutex> lock(progress->mutex);
        return std::make_shared<const SeriesResult>(progress->result);
      },
      [this](std::shared_ptr<const SeriesResult> r) {
        series_ = std::move(r);
        emit seriesChanged();
      });
}

void AnalysisController::showSeriesProgress() {
  // At most every kPartialMs: redrawing the overview per case would starve the event loop.
  if (!seriesProgress_ || (partialShown_.isValid() && partialShown_.elapsed() < kPartialMs)) {
    return;
  }
  partialShown_.start();
  {
    const std::lock_guard<std::mutex> lock(seriesProgress_->mutex);
    if (series_ && series_->done == seriesProgress_->result.done) return;
    series_ = std::make_shared<const SeriesResult>(seriesProgress_->result);
  }
  emit seriesChanged();
}

void AnalysisController::startSweep(const std::string& key) {
  sweepKey_ = key;
  const auto cases = context_->cases();
  const std::string casePath = context_->casePath().toStdString();
  SweepSettings s;
  s.run.mask_fill = context_->effectiveMaskFill();
  s.modes = {context_->effectiveMode()};
  s.points = 21;
  sweepRunner_->submit<ScaleSweep>(
      [cases, casePath, s, counters = counters_](
          const TaskControl& control, QString* error) -> std::shared_ptr<const ScaleSweep> {
        const RunningGuard running(counters->running);
        Result<std::shared_ptr<const CaseData>> data = cases->get(casePath);
        if (!data) {
          *error = QString::fromStdString(data.error().describe());
          return nullptr;
        }
        SweepSettings settings = s;
        settings.cancelled = [&control] { return control.stale(); };
        Result<ScaleSweep> sweep = scale_sweep(**data, settings);
        if (control.stale()) return nullptr;
        if (!sweep) {
          *error = QString::fromStdString(sweep.error().describe());
          return nullptr;
        }
        return std::make_shared<const ScaleSweep>(std::move(sweep).value());
      },
      [this](std::shared_ptr<const ScaleSweep> r) {
        sweep_ = std::move(r);
        emit sweepChanged();
      });
}

}  // namespace attnscope
