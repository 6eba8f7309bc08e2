// Head recompute jobs on a TaskRunner (see ComputeWorker.h).
#include "app/gui/ComputeWorker.h"

#include <sys/resource.h>
#include <unistd.h>

#include <exception>
#include <future>
#include <vector>

namespace attnscope {

// The worker thread's stage cache, reused across jobs of one case (`data`).
struct ComputeWorker::State {
  std::shared_ptr<const CaseData> data;
  HeadCache cache;
};

namespace {

// What a job hands back: a result (the forward's alone when forwardOnly), or the failure's
// message and hint.
struct Outcome {
  std::shared_ptr<const HeadResult> result;
  QString message, hint;
  bool forwardOnly = false;
};

std::shared_ptr<const Outcome> failure(const Error& e) {
  return std::make_shared<const Outcome>(
      Outcome{nullptr, QString::fromStdString(e.message), QString::fromStdString(e.hint)});
}

// The result of `asked` (the request as submitted: no cancel poll, which a request copied from
// the result must not carry, no forward_only, the submitted thread count).
std::shared_ptr<const Outcome> success(HeadResult r, const HeadRequest& asked,
                                       const std::string& file) {
  r.file_path = file;
  r.request = asked;
  r.request.cancelled = nullptr;
  const bool forwardOnly = !r.gradients;
  return std::make_shared<const Outcome>(
      Outcome{std::make_shared<const HeadResult>(std::move(r)), {}, {}, forwardOnly});
}

}  // namespace

ComputeWorker::ComputeWorker(QObject* parent) : QObject(parent), state_(std::make_shared<State>()) {
  runner_ = new TaskRunner(QStringLiteral("attnscope-compute"), TaskPriority::normal, this);
  connect(runner_, &TaskRunner::started, this, &ComputeWorker::started);
  connect(runner_, &TaskRunner::dropped, this, &ComputeWorker::dropped);
  connect(runner_, &TaskRunner::busyChanged, this, &ComputeWorker::busyChanged);
}

ComputeWorker::~ComputeWorker() = default;

quint64 ComputeWorker::submit(std::shared_ptr<CaseCache> cases, const QString& casePath,
                              const HeadRequest& request, First first) {
  auto job = [state = state_, cases = std::move(cases), path = casePath.toStdString(), request,
              first](const TaskControl& control, QString*) -> std::shared_ptr<const Outcome> {
    State& s = *state;
    Result<std::shared_ptr<const CaseData>> data = cases->get(path);
    if (!data) return failure(data.error());
    if (*data != s.data) {
      s.data = std::move(data).value();
      s.cache.clear();
    }
    HeadRequest polled = request;
    polled.cancelled = [control] { return control.stale(); };
    const std::string file = cases->reader()->path();
    try {
      // After a forward (or its statistics) handed over first: its time and phases, which the
      // whole head's result carries too.
      double forwardMs = 0;
      std::vector<HeadPhase> phases;
      const bool handsOver = first != First::none;
      if (handsOver) {
        polled.forward_only = true;
        polled.forward_stats_only = first == First::statistics;
        Result<HeadResult> early = compute_head(*s.data, polled, &s.cache);
        if (!early) return failure(early.error());
        if (early->gradients) return success(std::move(early).value(), request, file);
        forwardMs = early->elapsed_ms;
        phases = early->phases;
        control.handOver(success(std::move(early).value(), request, file));
        polled.forward_only = polled.forward_stats_only = false;
      }
      // The GUI thread draws the forward's views meanwhile: the backward runs on a thread of its
      // own at a lower priority (Linux: nice +5 for it and the kernel workers it starts), so the
      // GUI thread keeps the upper hand on a core they share.
      Result<HeadResult> r =
          handsOver ? std::async(std::launch::async,
                                 [&] {
                                   setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 5);
                                   return compute_head(*s.data, polled, &s.cache);
                                 })
                          .get()
                    : compute_head(*s.data, polled, &s.cache);
      if (!r) return failure(r.error());
      r->elapsed_ms += forwardMs;
      phases.insert(phases.end(), r->phases.begin(), r->phases.end());
      r->phases = std::move(phases);
      return success(std::move(r).value(), request, file);
    } catch (const KernelCancelled&) {
      return nullptr;  // stale: TaskRunner drops it; the cache holds only finished stages
    } catch (const std::exception& e) {
      s.cache.clear();
      return failure(Error{ErrorCode::invalid_argument,
                           std::string("recompute failed: ") + e.what(),
                           "change the settings or the zoom window"});
    }
  };
  // apply runs only for the latest job, so runner_->latestId() is this job's id.
  auto apply = [this](std::shared_ptr<const Outcome> outcome) {
    const quint64 id = runner_->latestId();
    if (outcome->result) {
      result_ = outcome->result;
      if (outcome->forwardOnly) {
        emit forwardReady(id);
      } else {
        emit finished(id);
      }
    } else {
      emit failed(id, outcome->message, outcome->hint);
    }
  };
  return runner_->submit<Outcome>(std::move(job), std::move(apply));
}

void ComputeWorker::cancel() {
  runner_->cancel();
}

}  // namespace attnscope
