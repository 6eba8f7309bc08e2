// Background stepper jobs and their snapshots (see StepperController.h).
#include "app/gui/StepperController.h"

#include <QFile>
#include <algorithm>
#include <iterator>

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

// The unfused kernel's stages in the order it computes them: one whole matrix each.
constexpr HeadView kEagerStages[] = {HeadView::s,  HeadView::p,  HeadView::o,  HeadView::dp,
                                     HeadView::ds, HeadView::dq, HeadView::dk, HeadView::dv};
constexpr int kEagerStageCount = static_cast<int>(std::size(kEagerStages));

QString countsText(const CellCounts& c) {
  return StepperController::tr("NaN %1, +inf %2, -inf %3").arg(c.nan).arg(c.pos_inf).arg(c.neg_inf);
}

std::string requestKey(const std::string& file, const std::string& casePath, const HeadRequest& r) {
  return file + "|" + casePath + "|" + std::to_string(r.batch) + "|" + std::to_string(r.head) +
         "|" + std::to_string(static_cast<int>(*r.run.precision)) + "|" +
         (r.run.scale ? std::to_string(*r.run.scale) : std::string("default")) + "|" +
         std::to_string(fill_key(r.run.mask_fill));
}

}  // namespace

StepperController::StepperController(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context), holder_(std::make_shared<Holder>()) {
  runner_ = new TaskRunner(QStringLiteral("attnscope-stepper"), TaskPriority::normal, this);
  connect(runner_, &TaskRunner::failed, this, &StepperController::failed);
  connect(context_, &SessionContext::caseChanged, this, &StepperController::onCaseChanged);
  connect(context_, &SessionContext::inputsChanged, this, &StepperController::onInputsChanged);
  // The stage walk of the unfused kernel reads the head's result: it goes on once that is in.
  connect(context_, &SessionContext::resultChanged, this, [this] {
    if (!pendingEager_ || !eager()) return;
    const bool toNonfinite = *pendingEager_;
    pendingEager_.reset();
    walkEager(static_cast<int>(target_), toNonfinite);
  });
}

bool StepperController::eager() const {
  return context_->caseInfo() != nullptr && context_->effectiveMode() == Mode::unfused;
}

bool StepperController::busy() const {
  return runner_->busy();
}

void StepperController::stepForward() {
  if (eager()) return walkEager(static_cast<int>(target_) + 1, false);
  const int64_t size = snapshot_ ? snapshot_->size : 1;
  submit(Op::seek, std::min(target_ + 1, size));
}

void StepperController::stepBack() {
  if (eager()) return walkEager(static_cast<int>(target_) - 1, false);
  submit(Op::seek, std::max<int64_t>(target_ - 1, 0));
}

void StepperController::runToNextNonfinite() {
  if (eager()) return walkEager(static_cast<int>(target_), true);
  submit(Op::run_to_nonfinite, target_);
}

void StepperController::seek(int64_t position) {
  if (eager()) return walkEager(static_cast<int>(position), false);
  submit(Op::seek, std::max<int64_t>(position, 0));
}

void StepperController::restart() {
  active_ = false;
  target_ = 0;
  clearSnapshot();
}

void StepperController::clearSnapshot() {
  runner_->cancel();
  submittedKey_.clear();
  snapshot_.reset();
  eagerText_.clear();
  pendingEager_.reset();
  context_->setStepTile(StepTile{});
  emit snapshotChanged();
}

void StepperController::walkEager(int stage, bool toNonfinite) {
  active_ = true;
  snapshot_.reset();
  context_->setStepTile(StepTile{});
  target_ = std::clamp(stage, 0, kEagerStageCount - 1);
  const auto r = context_->result();
  const bool shown = r && r->case_path == context_->casePath().toStdString() &&
                     r->request.batch == context_->batch() && r->request.head == context_->head() &&
                     r->request.mode() == Mode::unfused && r->gradients;
  const bool scores = shown && std::all_of(std::begin(kScoreViews), std::end(kScoreViews),
                                           [&](HeadView v) { return !r->grid(v).empty(); });
  if (!scores) {
    // Every stage's grid is needed to walk them: the score tabs are pooled only when shown.
    pendingEager_ = toNonfinite;  // goes on when the head's result is in
    context_->setScoresWanted(kAllScores);
    eagerText_ = tr("unfused (eager) kernel: computing its matrices for the stage walk…");
    emit snapshotChanged();
    return;
  }
  int at = static_cast<int>(target_);
  if (toNonfinite) {
    while (at < kEagerStageCount && r->grid(kEagerStages[at]).counts.nonfinite() == 0) ++at;
  }
  const bool none = toNonfinite && at == kEagerStageCount;
  target_ = std::min(at, kEagerStageCount - 1);
  const HeadView view = kEagerStages[target_];
  const CellCounts& counts = r->grid(view).counts;
  eagerText_ = tr("unfused (eager) kernel of b%1 h%2, %3: no tiles, each stage one whole matrix\n"
                  "stage %4 / %5 · %6 · non-finite: %7")
                   .arg(context_->batch())
                   .arg(context_->head())
                   .arg(QString::fromLatin1(precision_name(r->precision)))
                   .arg(target_ + 1)
                   .arg(kEagerStageCount)
                   .arg(QString::fromLatin1(head_view_name(view)))
                   .arg(countsText(counts));
  if (none) {
    eagerText_ += tr("\nno stage of this head's unfused run holds a NaN / Inf");
  } else if (toNonfinite) {
    eagerText_ += tr("\nstopped: the first stage holding a NaN / Inf (tab %1, its first cell "
                     "pinned)")
                      .arg(QString::fromLatin1(head_view_name(view)));
  }
  FocusTarget focus;
  focus.tensor = QString::fromLatin1(head_view_name(view));
  focus.batch = context_->batch();
  focus.head = context_->head();
  focus.pinFirstNonfinite = toNonfinite && !none;
  context_->focus(focus);
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
  if (!active_ || following_) return;
  if (context_->caseInfo() == nullptr) return restart();
  if (eager()) {  // the walk shows the new result's stage once it is in
    snapshot_.reset();
    context_->setStepTile(StepTile{});
    pendingEager_ = false;
    eagerText_ = tr("unfused (eager) kernel: computing…");
    emit snapshotChanged();
    return;
  }
  eagerText_.clear();
  // Inputs the stepper does not read (score tabs, reference) changed: its job or snapshot stands.
  const std::optional<HeadRequest> request = context_->currentRequest();
  const std::shared_ptr<CaseCache> cases = context_->cases();
  if (request && cases &&
      requestKey(cases->reader()->path(), context_->casePath().toStdString(), *request) ==
          submittedKey_) {
    return;
  }
  submit(Op::seek, target_);  // same position, new inputs
}

void StepperController::submit(Op op, int64_t position) {
  const std::optional<HeadRequest> request = context_->currentRequest();
  const std::shared_ptr<CaseCache> cases = context_->cases();
  if (!request || !cases) return;
  active_ = true;
  target_ = position;
  const std::string casePath = context_->casePath().toStdString();
  auto holder = holder_;
  const HeadRequest req = *request;
  const std::string file = cases->reader()->path();
  submittedKey_ = requestKey(file, casePath, req);
  auto job = [holder, cases, casePath, file, req, op, position](
                 const TaskControl& control,
                 QString* error) -> std::shared_ptr<const StepperSnapshot> {
    // The session of (b, h), kept in the holder (built when another head or setting asks).
    const auto session = [&](int64_t b, int64_t h) -> StepperSession* {
      HeadRequest r = req;
      r.batch = b;
      r.head = h;
      const std::string k = requestKey(file, casePath, r);
      if (holder->key == k && holder->session) return holder->session.get();
      holder->session.reset();
      if (!holder->data || holder->data->info.path != casePath) {
        Result<std::shared_ptr<const CaseData>> data = cases->get(casePath);
        if (!data) {
          *error = QString::fromStdString(data.error().describe());
          return nullptr;
        }
        holder->data = std::move(data).value();
      }
      Result<std::unique_ptr<StepperSession>> made =
          StepperSession::create(*holder->data, req.run, b, h, req.threads);
      if (!made) {
        *error = QString::fromStdString(made.error().describe());
        return nullptr;
      }
      holder->session = std::move(made).value();
      holder->key = k;
      return holder->session.get();
    };
    StepperSession* s = session(req.batch, req.head);
    if (s == nullptr) return nullptr;
    if (op == Op::seek) return std::make_shared<const StepperSnapshot>(s->seek(position));
    // Run to non-finite: this head from `position`, then every following (batch, head) of the
    // case from its start, until a step makes a value non-finite.
    StepperSnapshot snap = s->run_to_nonfinite(position);
    const CaseDims& dims = holder->data->info.dims;
    int64_t searched = 0;
    for (int64_t n = req.batch * dims.heads + req.head + 1;
         !snap.found && n < dims.batch * dims.heads && !control.stale(); ++n) {
      StepperSession* next = session(n / dims.heads, n % dims.heads);
      if (next == nullptr) return nullptr;
      StepperSnapshot there = next->run_to_nonfinite(0);
      if (there.found) {
        snap = std::move(there);
      } else {
        ++searched;
      }
    }
    snap.heads_searched = searched;
    snap.searched_to_end = !snap.found;
    return std::make_shared<const StepperSnapshot>(std::move(snap));
  };
  runner_->submit<StepperSnapshot>(
      job, [this, file, casePath, req](std::shared_ptr<const StepperSnapshot> result) {
        snapshot_ = std::move(result);
        HeadRequest shown = req;
        shown.batch = snapshot_->batch;
        shown.head = snapshot_->head;
        submittedKey_ = requestKey(file, casePath, shown);
        target_ = snapshot_->position;
        eagerText_.clear();
        // Run to non-finite stopped in another head: the view follows it there (its session is
        // the one kept, so the seek this causes costs nothing).
        following_ = true;  // the snapshot is of that head already: no seek there
        if (snapshot_->batch != context_->batch()) context_->setBatch(snapshot_->batch);
        if (snapshot_->head != context_->head()) context_->setHead(snapshot_->head);
        following_ = false;
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
