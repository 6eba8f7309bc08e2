// Drives the backward stepper of the head on screen in the background (DESIGN §6), in the kernel,
// precision, batch and head the view shows: F10 / Shift+F10 move the target position one step,
// F5 runs to the next step that makes a value non-finite, on through the following (batch,
// head)s of the case when the shown one has none (the view then follows to where it stopped).
// Requests are positions, so the latest one wins and skipped ones lose nothing; a change of
// head or settings rebuilds the session and returns to the same position (the steps are
// deterministic). The position belongs to its case: another case starts unstepped, and
// selecting a case again returns to where its stepper stood. The current tile goes into the
// SessionContext for every heatmap. The unfused (eager) kernel has no tiles: there the stepper
// walks its stages as whole matrices, in the order they are computed (S, P, O, dP, dS, dQ, dK,
// dV: the heatmap tabs), F5 to the first that holds a NaN / Inf.
#pragma once

#include <QObject>
#include <QString>
#include <map>
#include <memory>
#include <optional>

#include "core/view/stepper_session.h"

namespace attnscope {

class SessionContext;
class TaskRunner;

class StepperController : public QObject {
  Q_OBJECT

 public:
  explicit StepperController(SessionContext* context, QObject* parent = nullptr);

  void stepForward();
  void stepBack();
  void runToNextNonfinite();
  void seek(int64_t position);
  void restart();  // back to position 0 (nothing ran)

  // The latest applied snapshot (null before the first step, and in unfused mode), and the
  // position asked for.
  std::shared_ptr<const StepperSnapshot> snapshot() const { return snapshot_; }
  // Unfused mode: what the stage walk shows ("" in fused mode).
  const QString& eagerText() const { return eagerText_; }
  int64_t target() const { return target_; }
  bool busy() const;
  TaskRunner* runner() const { return runner_; }

 signals:
  void snapshotChanged();
  void failed(const QString& message);

 private:
  enum class Op { seek, run_to_nonfinite };
  void submit(Op op, int64_t position);
  // The unfused kernel's stage walk: shows stage `stage` of kEagerStages (clamped), or with
  // `toNonfinite` the first from `stage` on whose grid holds a NaN / Inf.
  void walkEager(int stage, bool toNonfinite);
  bool eager() const;
  void onCaseChanged();
  void onInputsChanged();
  void clearSnapshot();

  SessionContext* context_;
  TaskRunner* runner_ = nullptr;
  // Lives on the runner's thread (jobs run one at a time); rebuilt when the key changes.
  struct Holder;
  std::shared_ptr<Holder> holder_;
  std::shared_ptr<const StepperSnapshot> snapshot_;
  int64_t target_ = 0;
  bool active_ = false;  // a step was requested since the last restart
  QString eagerText_;
  std::string submittedKey_;  // the inputs of the last job submitted (requestKey)
  bool following_ = false;    // the view is being moved to the head a snapshot stopped in
  // The stage walk waits for the head's result: whether it runs to a non-finite stage then.
  std::optional<bool> pendingEager_;
  QString caseKey_;                       // "file|case" the position belongs to
  std::map<QString, int64_t> positions_;  // where the stepper stood in other cases (active ones)
};

}  // namespace attnscope
