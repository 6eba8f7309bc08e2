// Background scan of the opened dumps (see ScanController.h).
#include "app/gui/ScanController.h"

#include <mutex>

#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"

namespace attnscope {
namespace {

constexpr int kPartialMs = 250;  // partial scans are shown this often
constexpr int kKernelThreads = 1;

}  // namespace

std::optional<size_t> DumpScan::firstError() const {
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].state == ScanState::pending) return std::nullopt;
    if (cases[i].state == ScanState::done && cases[i].verdict.worst == Severity::error) return i;
  }
  return std::nullopt;
}

ScannedOutcomes ScanController::outcomes(const std::vector<int>& files) const {
  ScannedOutcomes out;
  for (int index : files) {
    out.scans.push_back(scan(context_->file(index).path));
    const DumpScan* s = out.scans.back().get();
    out.complete = out.complete && s && s->complete();
    if (!s) continue;
    for (const ScannedCase& c : s->cases) {
      if (c.state == ScanState::pending) break;
      if (c.state != ScanState::done) continue;
      out.outcomes.push_back(c.verdict.outcome);
      out.where.emplace_back(index, &c);
      out.last_step = c.verdict.outcome.step;
    }
  }
  return out;
}

const ScannedCase* DumpScan::find(const std::string& path) const {
  for (const ScannedCase& c : cases) {
    if (c.path == path) return &c;
  }
  return nullptr;
}

struct ScanController::Progress {
  std::mutex mutex;
  DumpScan scan;  // guarded by mutex while the job runs
};

ScanController::ScanController(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context) {
  // Normal priority, unlike the other analyses (TaskPriority::background): it is what leads the
  // user to the problem. One kernel thread leaves the head recompute the other cores.
  runner_ = new TaskRunner(QStringLiteral("attnscope-scan"), TaskPriority::normal, this);
  connect(runner_, &TaskRunner::progress, this, &ScanController::showProgress);
  connect(context_, &SessionContext::filesChanged, this, [this] {
    if (running_.isEmpty()) startNext();
  });
  connect(context_, &SessionContext::casesAdded, this, &ScanController::addCases);
}

void ScanController::addCases(const QString& file, const QStringList& paths) {
  if (running_ == file) cancel();  // keeps the verdicts so far; resumed below with the rest
  if (const auto known = scan(file)) {
    DumpScan grown = *known;
    for (const QString& p : paths) {
      grown.cases.emplace_back();
      grown.cases.back().path = p.toStdString();
    }
    scans_[file] = std::make_shared<const DumpScan>(std::move(grown));
    emit scanChanged(file);
  }
  if (running_.isEmpty()) startNext();
}

std::shared_ptr<const DumpScan> ScanController::scan(const QString& file) const {
  const auto it = scans_.find(file);
  return it == scans_.end() ? nullptr : it->second;
}

bool ScanController::busy() const {
  return runner_->busy();
}

void ScanController::cancel() {
  runner_->cancel();
  if (running_.isEmpty()) return;
  const QString file = running_;
  {
    const std::lock_guard<std::mutex> lock(progress_->mutex);
    scans_[file] = std::make_shared<const DumpScan>(progress_->scan);
  }
  running_.clear();
  progress_.reset();
  emit scanChanged(file);
}

void ScanController::rescan() {
  if (running_.isEmpty()) startNext();
}

void ScanController::startNext() {
  // The first open file whose scan has not run to the end (a cancelled one resumes).
  int index = -1;
  for (int i = 0; i < context_->fileCount() && index < 0; ++i) {
    const auto known = scan(context_->file(i).path);
    if (!known || !known->complete()) index = i;
  }
  if (index < 0) return;
  const OpenDump& dump = context_->file(index);
  auto progress = std::make_shared<Progress>();
  if (const auto known = scan(dump.path)) {
    progress->scan = *known;
  } else {
    for (const CaseInfo& c : dump.reader->cases()) {
      progress->scan.cases.emplace_back();
      progress->scan.cases.back().path = c.path;
    }
  }
  running_ = dump.path;
  progress_ = progress;
  scans_[dump.path] = std::make_shared<const DumpScan>(progress->scan);
  emit scanChanged(dump.path);
  runner_->submit<DumpScan>(
      [caseCache = dump.cases, summaries = dump.summaries, progress,
       keepOpen = dump.reader->keep_open(),
       rank = dump.run.folder.isEmpty() ? std::nullopt : std::optional<int64_t>(dump.run.rank)](
          const TaskControl& control, QString*) -> std::shared_ptr<const DumpScan> {
        const int total = static_cast<int>(progress->scan.cases.size());
        for (int i = 0; i < total; ++i) {
          std::string path;
          {
            const std::lock_guard<std::mutex> lock(progress->mutex);
            if (progress->scan.cases[i].state != ScanState::pending) continue;
            path = progress->scan.cases[i].path;
          }
          if (control.stale()) return nullptr;
          // The summary is shared with the findings list of the shown case (analysed once).
          const auto stale = [&control] { return control.stale(); };
          Result<CaseVerdict> v = [&]() -> Result<CaseVerdict> {
            // Keep::no: the scan walks every case; the one on screen stays cached.
            Result<std::shared_ptr<const CaseData>> data =
                caseCache->get(path, CaseCache::Keep::no);
            if (!data) return data.error();
            const Result<std::shared_ptr<const CaseSummary>> summary = summaries->get(
                path,
                [&] {
                  SummarySettings settings;
                  settings.threads = kKernelThreads;
                  settings.cancelled = stale;
                  return summarize_case(**data, settings);
                },
                stale);
            if (!summary) return summary.error();
            return scan_verdict((*data)->info, (*summary)->findings, rank);
          }();
          if (control.stale()) return nullptr;
          {
            const std::lock_guard<std::mutex> lock(progress->mutex);
            ScannedCase& c = progress->scan.cases[i];
            c.state = v ? ScanState::done : ScanState::error;
            if (v) {
              c.verdict = std::move(v).value();
            } else {
              c.error = v.error().describe();
            }
            ++progress->scan.done;
          }
          control.report(i + 1, total);
        }
        const std::lock_guard<std::mutex> lock(progress->mutex);
        return std::make_shared<const DumpScan>(progress->scan);
      },
      [this, file = dump.path](std::shared_ptr<const DumpScan> r) {
        scans_[file] = std::move(r);
        running_.clear();
        progress_.reset();
        emit scanChanged(file);
        startNext();
      });
}

void ScanController::showProgress() {
  // At most every kPartialMs: repainting the browser per case would starve the event loop.
  if (!progress_ || (partialShown_.isValid() && partialShown_.elapsed() < kPartialMs)) return;
  partialShown_.start();
  {
    const std::lock_guard<std::mutex> lock(progress_->mutex);
    const auto shown = scan(running_);
    if (shown && shown->done == progress_->scan.done) return;
    scans_[running_] = std::make_shared<const DumpScan>(progress_->scan);
  }
  emit scanChanged(running_);
}

}  // namespace attnscope
