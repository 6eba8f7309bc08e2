// Worker thread of the GUI's recompute jobs (see ComputeWorker.h). The runner lives on the
// worker thread and keeps the last loaded case, so settings changes do not re-read the file.
#include "app/gui/ComputeWorker.h"

#include <QMetaObject>

namespace attnscope {

struct ComputeJob {
  quint64 id = 0;
  std::shared_ptr<const DumpReader> reader;
  std::string casePath;
  HeadRequest request;
};

class ComputeWorker::Runner : public QObject {
 public:
  Runner(ComputeWorker* owner, std::shared_ptr<std::atomic<quint64>> latest)
      : owner_(owner), latest_(std::move(latest)) {}

  // Runs on the worker thread.
  void run(const ComputeJob& job) {
    if (job.id != latest_->load()) return post([o = owner_, id = job.id] { o->reportDropped(id); });
    post([o = owner_, id = job.id] { emit o->started(id); });
    if (!load(job)) return;
    Result<HeadResult> r = compute_head(*data_, job.request);
    if (!r) return fail(job.id, r.error());
    r->file_path = job.reader->path();
    auto result = std::make_shared<const HeadResult>(std::move(r).value());
    post([o = owner_, id = job.id, result] { o->deliver(id, result); });
  }

 private:
  template <typename F>
  void post(F&& f) {
    QMetaObject::invokeMethod(owner_, std::forward<F>(f), Qt::QueuedConnection);
  }

  void fail(quint64 id, const Error& e) {
    post([o = owner_, id, m = QString::fromStdString(e.message),
          h = QString::fromStdString(e.hint)] { o->reportFailure(id, m, h); });
  }

  bool load(const ComputeJob& job) {
    if (data_ && reader_ == job.reader && path_ == job.casePath) return true;
    Result<CaseData> loaded = job.reader->load(job.casePath);
    if (!loaded) {
      fail(job.id, loaded.error());
      return false;
    }
    data_ = std::make_shared<const CaseData>(std::move(loaded).value());
    reader_ = job.reader;
    path_ = job.casePath;
    return true;
  }

  ComputeWorker* owner_;
  std::shared_ptr<std::atomic<quint64>> latest_;
  std::shared_ptr<const DumpReader> reader_;
  std::string path_;
  std::shared_ptr<const CaseData> data_;
};

ComputeWorker::ComputeWorker(QObject* parent)
    : QObject(parent), latest_(std::make_shared<std::atomic<quint64>>(0)) {
  runner_ = new Runner(this, latest_);
  runner_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, runner_, &QObject::deleteLater);
  thread_.setObjectName(QStringLiteral("attnscope-compute"));
  thread_.start();
}

ComputeWorker::~ComputeWorker() {
  latest_->store(~quint64{0});  // every queued job is stale: the thread drains quickly
  thread_.quit();
  thread_.wait();
}

quint64 ComputeWorker::submit(std::shared_ptr<const DumpReader> reader, const QString& casePath,
                              const HeadRequest& request) {
  ComputeJob job{++next_, std::move(reader), casePath.toStdString(), request};
  latest_->store(job.id);
  setBusy(true);
  QMetaObject::invokeMethod(
      runner_, [r = runner_, job] { r->run(job); }, Qt::QueuedConnection);
  return job.id;
}

void ComputeWorker::cancel() {
  latest_->store(++next_);
  setBusy(false);
}

void ComputeWorker::setBusy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  emit busyChanged(busy);
}

void ComputeWorker::deliver(quint64 id, std::shared_ptr<const HeadResult> result) {
  if (id != latest_->load()) return reportDropped(id);
  result_ = std::move(result);
  setBusy(false);
  emit finished(id);
}

void ComputeWorker::reportFailure(quint64 id, const QString& message, const QString& hint) {
  if (id != latest_->load()) return reportDropped(id);
  setBusy(false);
  emit failed(id, message, hint);
}

void ComputeWorker::reportDropped(quint64 id) {
  ++dropped_;
  emit dropped(id);
}

}  // namespace attnscope
