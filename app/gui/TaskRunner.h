// A background job runner for the GUI's secondary computations (case analysis, series of
// cases, scale sweep, backward stepper): one worker thread per runner, jobs carry an id, the
// latest submission wins (older queued jobs are skipped, late results dropped), jobs may report
// progress, hand over a first result before their last, and poll a cancel flag. Jobs are typed: a
// job of T hands its std::shared_ptr<const T> to the apply callback of the same submit (on the GUI
// thread); only inside the runner does the result travel type-erased.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <atomic>
#include <functional>
#include <memory>

namespace attnscope {

// What a job sees while it runs (on the worker thread).
class TaskControl {
 public:
  TaskControl(std::shared_ptr<std::atomic<quint64>> latest, quint64 id,
              std::function<void(int, int)> progress,
              std::function<void(std::shared_ptr<const void>)> early)
      : latest_(std::move(latest)),
        id_(id),
        progress_(std::move(progress)),
        early_(std::move(early)) {}

  // True once a newer job was submitted or the runner was cancelled: stop early.
  bool stale() const { return latest_->load() != id_; }
  // done of total units finished (posted to the GUI thread as TaskRunner::progress).
  void report(int done, int total) const { progress_(done, total); }
  // Hands a first result to the job's apply callback on the GUI thread (if the job is still the
  // latest when it arrives) while the job runs on; busy stays set until the job returns. T is
  // the job's own result type.
  template <class T>
  void handOver(std::shared_ptr<const T> first) const {
    early_(std::move(first));
  }

 private:
  std::shared_ptr<std::atomic<quint64>> latest_;
  quint64 id_;
  std::function<void(int, int)> progress_;
  std::function<void(std::shared_ptr<const void>)> early_;
};

// How a runner's thread competes for the CPU. background: nice +10 (Linux sets it per thread;
// the kernels' worker threads it starts inherit it), about a tenth of a core against a normal
// thread that wants the same core, so the GUI thread and the head recompute come first, yet the
// job still progresses on a machine whose every core is busy (a training run beside the
// debugger, or other tests), where SCHED_IDLE (QThread::IdlePriority) would get no CPU at all.
enum class TaskPriority { normal, background };

// A job of T returns its result, or nullptr with *error set on failure (or when stale).
template <class T>
using TaskJob = std::function<std::shared_ptr<const T>(const TaskControl& control, QString* error)>;
// Runs on the GUI thread with the result of the latest job, never null.
template <class T>
using TaskApply = std::function<void(std::shared_ptr<const T> result)>;

class TaskRunner : public QObject {
  Q_OBJECT

 public:
  explicit TaskRunner(const QString& name, TaskPriority priority = TaskPriority::normal,
                      QObject* parent = nullptr);
  ~TaskRunner() override;

  // Queues a job; `apply` runs on the GUI thread with its result if it is still the latest.
  template <class T>
  quint64 submit(TaskJob<T> job, TaskApply<T> apply) {
    return submitErased(
        [job = std::move(job)](const TaskControl& control, QString* error) -> Erased {
          return job(control, error);
        },
        [apply = std::move(apply)](const Erased& result) {
          apply(std::static_pointer_cast<const T>(result));
        });
  }
  // Makes every submitted job stale and clears busy.
  void cancel();

  // Id of the latest submission (0 before the first); apply callbacks run only for it.
  quint64 latestId() const { return latest_->load(); }
  bool busy() const { return busy_; }
  int droppedCount() const { return dropped_; }

 signals:
  void busyChanged(bool busy);
  // Job `id` began running on the worker thread.
  void started(quint64 id);
  void progress(int done, int total);
  void failed(const QString& message);
  void finished(quint64 id);
  // Job `id` was skipped (stale before it ran) or its late result discarded.
  void dropped(quint64 id);

 private:
  class Worker;
  using Erased = std::shared_ptr<const void>;
  using ErasedJob = std::function<Erased(const TaskControl&, QString*)>;
  using ErasedApply = std::function<void(const Erased&)>;

  quint64 submitErased(ErasedJob job, ErasedApply apply);
  void setBusy(bool busy);
  void deliver(quint64 id, const Erased& result, const QString& error, const ErasedApply& apply);
  void deliverEarly(quint64 id, const Erased& result, const ErasedApply& apply);

  QThread thread_;
  Worker* worker_ = nullptr;
  std::shared_ptr<std::atomic<quint64>> latest_;
  quint64 next_ = 0;
  bool busy_ = false;
  int dropped_ = 0;
};

}  // namespace attnscope
