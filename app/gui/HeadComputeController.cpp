// One head compute per turn of input changes, its parts applied as they come (see
// HeadComputeController.h).
#include "app/gui/HeadComputeController.h"

#include <QTimer>

#include "app/gui/ComputeWorker.h"
#include "app/gui/SessionContext.h"

namespace attnscope {

HeadComputeController::HeadComputeController(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context), worker_(new ComputeWorker(this)) {
  auto* turn = new QTimer(this);  // coalesces the changes of one event-loop turn
  turn->setSingleShot(true);
  turn->setInterval(0);
  connect(turn, &QTimer::timeout, this, &HeadComputeController::request);
  connect(context_, &SessionContext::inputsChanged, turn, qOverload<>(&QTimer::start));
  connect(worker_, &ComputeWorker::finished, this, &HeadComputeController::apply);
  connect(worker_, &ComputeWorker::forwardReady, this, &HeadComputeController::apply);
}

void HeadComputeController::request() {
  const std::optional<HeadRequest> request = context_->currentRequest();
  if (!request) return;
  const HeadView shown = context_->shownView();
  worker_->submit(context_->cases(), context_->casePath(), *request,
                  is_statistics_view(shown) ? ComputeWorker::First::statistics
                  : is_forward_view(shown)  ? ComputeWorker::First::forward
                                            : ComputeWorker::First::none);
  ++requests_;
}

void HeadComputeController::apply() {
  const auto result = worker_->result();
  context_->setResult(result);
  const QString text = result->gradients ? tr("%1 · computed in %2 ms")
                       : result->outputs
                           ? tr("%1 · forward in %2 ms, backward running…")
                           : tr("%1 · scores in %2 ms, forward and backward running…");
  emit computed(
      text.arg(QString::fromStdString(result->case_path)).arg(result->elapsed_ms, 0, 'f', 1));
}

}  // namespace attnscope
