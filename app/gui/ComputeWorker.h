// Background recompute of the selected head (DESIGN §1: compute never runs on the GUI thread):
// a typed client of TaskRunner. Jobs carry an id and run one at a time on the runner's worker
// thread; the latest request wins: queued jobs older than it are skipped, a running job's CPU
// kernels stop at their next tile once a newer request or cancel() makes it stale, and a job
// that finishes after a newer request is dropped instead of applied. Cases come from the
// session's CaseCache; the worker thread keeps a HeadCache of the last case, so a settings
// change neither re-reads the file nor reruns the stages it does not affect. A job for a view
// the forward alone fills (S, P, O) hands that forward's result over first, then the whole
// head's.
#pragma once

#include <QObject>
#include <QString>
#include <memory>

#include "app/gui/TaskRunner.h"
#include "core/io/case_cache.h"
#include "core/view/head_compute.h"

namespace attnscope {

class ComputeWorker : public QObject {
  Q_OBJECT

 public:
  explicit ComputeWorker(QObject* parent = nullptr);
  ~ComputeWorker() override;

  // What a job hands over (forwardReady) before the whole head, when compute_head honours it:
  // nothing, the forward_only result, or the forward's statistics (forward_stats_only).
  enum class First { none, forward, statistics };

  // Queues a recompute of one head of a case; returns its id (increasing). Every earlier job
  // becomes stale.
  quint64 submit(std::shared_ptr<CaseCache> cases, const QString& casePath,
                 const HeadRequest& request, First first = First::none);
  // Makes every submitted job stale (its result will be dropped, its kernels stop at the next
  // tile) and clears busy.
  void cancel();

  quint64 latestId() const { return runner_->latestId(); }
  bool busy() const { return runner_->busy(); }
  // Result of the latest job that finished and was applied (null before the first).
  std::shared_ptr<const HeadResult> result() const { return result_; }
  int droppedCount() const { return runner_->droppedCount(); }

 signals:
  void started(quint64 id);
  // The latest job finished; result() holds its output (after a forward first, with the time
  // and phases of both).
  void finished(quint64 id);
  // The latest job's forward (or its statistics) is done and it goes on with the rest; result()
  // holds that output (HeadResult::gradients false; outputs false after the statistics) until
  // finished.
  void forwardReady(quint64 id);
  void failed(quint64 id, const QString& message, const QString& hint);
  // A stale job was skipped or its result discarded.
  void dropped(quint64 id);
  void busyChanged(bool busy);

 private:
  struct State;

  TaskRunner* runner_ = nullptr;
  // Owned by the worker thread's jobs (they run one at a time); shared so that a job still
  // running while the worker is destroyed keeps it alive.
  std::shared_ptr<State> state_;
  std::shared_ptr<const HeadResult> result_;
};

}  // namespace attnscope
