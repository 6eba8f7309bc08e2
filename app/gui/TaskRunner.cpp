// Worker thread of a TaskRunner (see TaskRunner.h).
#include "app/gui/TaskRunner.h"

#include <sys/resource.h>
#include <unistd.h>

#include <QMetaObject>
#include <algorithm>
#include <exception>

namespace attnscope {

class TaskRunner::Worker : public QObject {};

namespace {

constexpr int kBackgroundNice = 10;  // TaskPriority::background: this much above the process
constexpr int kLowestNice = 19;

}  // namespace

TaskRunner::TaskRunner(const QString& name, TaskPriority priority, QObject* parent)
    : QObject(parent), latest_(std::make_shared<std::atomic<quint64>>(0)) {
  worker_ = new Worker;
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  thread_.setObjectName(name);
  thread_.start();
  if (priority == TaskPriority::background) {
    // The first event of the worker thread, before any job: its own nice value, raised from
    // the one it inherited (a GUI started under `nice` keeps its background a step lower).
    // Raising it is always allowed; failing leaves the thread at the process' priority.
    QMetaObject::invokeMethod(
        worker_,
        [] {
          const auto self = static_cast<id_t>(gettid());
          const int inherited = getpriority(PRIO_PROCESS, self);
          setpriority(PRIO_PROCESS, self, std::min(inherited + kBackgroundNice, kLowestNice));
        },
        Qt::QueuedConnection);
  }
}

TaskRunner::~TaskRunner() {
  latest_->store(~quint64{0});  // queued jobs are skipped, running ones see stale()
  thread_.quit();
  thread_.wait();
}

quint64 TaskRunner::submitErased(ErasedJob job, ErasedApply apply) {
  const quint64 id = ++next_;
  latest_->store(id);
  setBusy(true);
  auto latest = latest_;
  QMetaObject::invokeMethod(
      worker_,
      [this, id, latest, job = std::move(job), apply = std::move(apply)] {
        if (latest->load() != id) {
          QMetaObject::invokeMethod(this, [this, id, apply] { deliver(id, {}, {}, apply); });
          return;
        }
        QMetaObject::invokeMethod(this, [this, id] { emit started(id); });
        const TaskControl control(
            latest, id,
            [this](int done, int total) {
              QMetaObject::invokeMethod(this, [this, done, total] { emit progress(done, total); });
            },
            [this, id, apply](const Erased& first) {
              QMetaObject::invokeMethod(
                  this, [this, id, first, apply] { deliverEarly(id, first, apply); });
            });
        QString error;
        Erased result;
        try {
          result = job(control, &error);
        } catch (const std::exception& e) {
          error = QString::fromUtf8(e.what());
        }
        if (!result && error.isEmpty() && latest->load() == id) error = tr("no result");
        QMetaObject::invokeMethod(
            this, [this, id, result, error, apply] { deliver(id, result, error, apply); });
      },
      Qt::QueuedConnection);
  return id;
}

void TaskRunner::cancel() {
  latest_->store(++next_);
  setBusy(false);
}

void TaskRunner::setBusy(bool busy) {
  if (busy == busy_) return;
  busy_ = busy;
  emit busyChanged(busy);
}

void TaskRunner::deliverEarly(quint64 id, const Erased& result, const ErasedApply& apply) {
  if (id == latest_->load()) apply(result);
}

void TaskRunner::deliver(quint64 id, const Erased& result, const QString& error,
                         const ErasedApply& apply) {
  if (id != latest_->load()) {
    ++dropped_;
    emit dropped(id);
    return;
  }
  setBusy(false);
  if (!result) {
    emit failed(error);
    return;
  }
  apply(result);
  emit finished(id);
}

}  // namespace attnscope
