// Background stepper jobs and their snapshots (see StepperController.h).
#include "app/gui/StepperController.h"

#include <QFile>
#include <algorithm>

#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"

namespace attnscope {

// The session and what it was built for; touched only by jobs on the runner thread.
struct StepperController::Holder {
  std::string key;
  std::shared_ptr<const CaseData> data;  // what `session` steps through (it keeps no copy)
  std::unique_ptr<StepperSession> session;
};

namespace {

std::string requestKey(const std::string& file, const std::string& casePath, const HeadRequest& r) {
  return file + "|" + casePath + "|" + std::to_string(r.batch) + "|" + std::to_string(r.head) +
         "|" + std::to_string(static_cast<int>(*r.settings.precision)) + "|" +
         (r.settings.scale ? std::to_string(*r.settings.scale) : std::string("default")) + "|" +
         std::to_string(fill_key(r.settings.mask_fill));
}

}  // namespace

StepperController::StepperController(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context), holder_(std::make_shared<Holder>()) {
  runner_ = new TaskRunner(QStringLiteral("attnscope-stepper"), TaskPriority::normal, this);
  connect(runner_, &TaskRunner::failed, this, &StepperController::failed);
  connect(context_, &SessionContext::caseChanged, this, &StepperController::onCaseChanged);
  connect(context_, &SessionContext::inputsChanged, this, &StepperController::onInputsChanged);
}

bool StepperController::busy() const {
  return runner_->busy();
}

void StepperController::stepForward() {
  const int64_t size = snapshot_ ? snapshot_->size : 1;
  submit(Op::seek, std::min(target_ + 1, size));
}

void StepperController::stepBack() {
  submit(Op::seek, std::max<int64_t>(target_ - 1, 0));
}

void StepperController::runToNextNonfinite() {
  submit(Op::run_to_nonfinite, target_);
}

void StepperController::seek(int64_t position) {
  submit(Op::seek, std::max<int64_t>(position, 0));
}

void StepperController::restart() {
  active_ = false;
  target_ = 0;
  clearSnapshot();
}

void StepperController::clearSnapshot() {
  runner_->cancel();
  snapshot_.reset();
  context_->setStepTile(StepTile{});
  emit snapshotChanged();
}

void StepperController::onCaseChanged() {
  // caseChanged comes before inputsChanged: this sets the position the new case resumes at.
  if (active_) {
    positions_[caseKey_] = target_;
  } else {
    positions_.erase(caseKey_);
  }
  caseKey_ = context_->caseKey();
  const auto saved = positions_.find(caseKey_);
  if (saved == positions_.end()) return restart();
  active_ = true;  // onInputsChanged seeks there
  target_ = saved->second;
  clearSnapshot();
}

void StepperController::onInputsChanged() {
  if (!active_) return;
  if (context_->caseInfo() == nullptr) return restart();
  submit(Op::seek, target_);  // same position, new inputs
}

void StepperController::submit(Op op, int64_t position) {
  const std::optional<HeadRequest> request = context_->currentRequest();
  const std::shared_ptr<CaseCache> cases = context_->cases();
  if (!request || !cases) return;
  active_ = true;
  target_ = position;
  const std::string casePath = context_->casePath().toStdString();
  const std::string key = requestKey(cases->reader()->path(), casePath, *request);
  auto holder = holder_;
  const HeadRequest req = *request;
  auto job = [holder, cases, casePath, key, req, op, position](
                 const TaskControl&, QString* error) -> std::shared_ptr<const StepperSnapshot> {
    if (holder->key != key || !holder->session) {
      holder->session.reset();
      Result<std::shared_ptr<const CaseData>> data = cases->get(casePath);
      if (!data) {
        *error = QString::fromStdString(data.error().describe());
        return nullptr;
      }
      holder->data = std::move(data).value();
      Result<std::unique_ptr<StepperSession>> made =
          StepperSession::create(*holder->data, req.settings, req.batch, req.head, req.threads);
      if (!made) {
        *error = QString::fromStdString(made.error().describe());
        return nullptr;
      }
      holder->session = std::move(made).value();
      holder->key = key;
    }
    StepperSession& s = *holder->session;
    return std::make_shared<const StepperSnapshot>(op == Op::seek ? s.seek(position)
                                                                  : s.run_to_nonfinite(position));
  };
  runner_->submit<StepperSnapshot>(job, [this](std::shared_ptr<const StepperSnapshot> result) {
    snapshot_ = std::move(result);
    target_ = snapshot_->position;
    const StepInfo& s = snapshot_->step;
    StepTile tile;
    tile.valid = s.index >= 0;
    tile.stage = QString::fromLatin1(step_stage_name(s.stage));
    tile.qTile = s.q_tile;
    tile.kvTile = s.kv_tile;
    tile.window = s.window;
    context_->setStepTile(tile);
    emit snapshotChanged();
  });
}

}  // namespace attnscope
