// Head recompute jobs on a TaskRunner (see ComputeWorker.h).
#include "app/gui/ComputeWorker.h"

#include <exception>

namespace attnscope {

// The worker thread's stage cache, reused across jobs of one case (`data`).
struct ComputeWorker::State {
  std::shared_ptr<const CaseData> data;
  HeadCache cache;
};

namespace {

// What a job hands back: a result, or the failure's message and hint.
struct Outcome {
  std::shared_ptr<const HeadResult> result;
  QString message, hint;
};

std::shared_ptr<const Outcome> failure(const Error& e) {
  return std::make_shared<const Outcome>(
      Outcome{nullptr, QString::fromStdString(e.message), QString::fromStdString(e.hint)});
}

}  // namespace

ComputeWorker::ComputeWorker(QObject* parent) : QObject(parent), state_(std::make_shared<State>()) {
  runner_ = new TaskRunner(QStringLiteral("attnscope-compute"), QThread::InheritPriority, this);
  connect(runner_, &TaskRunner::started, this, &ComputeWorker::started);
  connect(runner_, &TaskRunner::dropped, this, &ComputeWorker::dropped);
  connect(runner_, &TaskRunner::busyChanged, this, &ComputeWorker::busyChanged);
}

ComputeWorker::~ComputeWorker() = default;

quint64 ComputeWorker::submit(std::shared_ptr<CaseCache> cases, const QString& casePath,
                              const HeadRequest& request) {
  auto job = [state = state_, cases = std::move(cases), path = casePath.toStdString(), request](
                 const TaskControl& control, QString*) -> std::shared_ptr<const Outcome> {
    State& s = *state;
    Result<std::shared_ptr<const CaseData>> data = cases->get(path);
    if (!data) return failure(data.error());
    if (*data != s.data) {
      s.data = std::move(data).value();
      s.cache.clear();
    }
    HeadRequest polled = request;
    polled.cancelled = [control] { return control.stale(); };
    try {
      Result<HeadResult> r = compute_head(*s.data, polled, &s.cache);
      if (!r) return failure(r.error());
      r->file_path = cases->reader()->path();
      r->request.cancelled = nullptr;  // a request copied from the result must not carry it
      return std::make_shared<const Outcome>(
          Outcome{std::make_shared<const HeadResult>(std::move(r).value()), {}, {}});
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
      emit finished(id);
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
