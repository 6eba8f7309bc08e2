// Background recompute (DESIGN §1: compute never runs on the GUI thread). Jobs carry an id and
// run one at a time on a worker thread; the latest request wins: queued jobs older than it are
// skipped, and a job that finishes after a newer request is dropped instead of applied.
#pragma once

#include <QObject>
#include <QString>
#include <QThread>
#include <atomic>
#include <memory>

#include "app/gui/HeadCompute.h"
#include "core/io/hdf5_dump.h"

namespace attnscope {

class ComputeWorker : public QObject {
  Q_OBJECT

 public:
  explicit ComputeWorker(QObject* parent = nullptr);
  ~ComputeWorker() override;

  // Queues a recompute of one head of a case; returns its id (increasing). Every earlier job
  // becomes stale.
  quint64 submit(std::shared_ptr<const DumpReader> reader, const QString& casePath,
                 const HeadRequest& request);
  // Makes every submitted job stale (its result will be dropped) and clears busy.
  void cancel();

  quint64 latestId() const { return latest_->load(); }
  bool busy() const { return busy_; }
  // Result of the latest job that finished and was applied (null before the first).
  std::shared_ptr<const HeadResult> result() const { return result_; }
  int droppedCount() const { return dropped_; }

 signals:
  void started(quint64 id);
  // The latest job finished; result() holds its output.
  void finished(quint64 id);
  void failed(quint64 id, const QString& message, const QString& hint);
  // A stale job was skipped or its result discarded.
  void dropped(quint64 id);
  void busyChanged(bool busy);

 private:
  class Runner;

  void setBusy(bool busy);
  void deliver(quint64 id, std::shared_ptr<const HeadResult> result);
  void reportFailure(quint64 id, const QString& message, const QString& hint);
  void reportDropped(quint64 id);

  QThread thread_;
  Runner* runner_ = nullptr;
  std::shared_ptr<std::atomic<quint64>> latest_;
  quint64 next_ = 0;
  bool busy_ = false;
  int dropped_ = 0;
  std::shared_ptr<const HeadResult> result_;
};

}  // namespace attnscope
