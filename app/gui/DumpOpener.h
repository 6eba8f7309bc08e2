// Opens dumps off the GUI thread. Opening runs the attnscope-probe child process, which
// discovers every case of the file (seconds for thousands of cases) and test-reads its data,
// then opens the file with the probe's listing (open_untrusted_dump); both run as a job of a
// TaskRunner, one file after the other in request order, then the reader is handed to
// SessionContext::adoptFile on the GUI thread. Cancel drops the running open's result and every
// queued request.
#pragma once

#include <QObject>
#include <QString>
#include <deque>
#include <functional>
#include <optional>

namespace attnscope {

class SessionContext;
class TaskRunner;

class DumpOpener : public QObject {
  Q_OBJECT

 public:
  // Called on the GUI thread with the file's index in the session, or -1 when it failed (after
  // `failed`) or was cancelled.
  using Done = std::function<void(int fileIndex)>;

  explicit DumpOpener(SessionContext* context, QObject* parent = nullptr);

  // Queues FILE; an already open file completes without a job when its turn comes.
  void open(const QString& path, Done done = {});
  // Drops the running open (its job finishes discovery, the result is discarded) and the queue;
  // their Done callbacks get -1.
  void cancel();
  bool busy() const { return current_.has_value() || !queue_.empty(); }
  int queued() const { return static_cast<int>(queue_.size()); }
  TaskRunner* runner() const { return runner_; }

 signals:
  void started(const QString& path);  // the background open of `path` begins
  void busyChanged(bool busy);
  void failed(const QString& title, const QString& message, const QString& hint);

 private:
  struct Request {
    QString path;
    Done done;
  };

  void next();
  void finish(int fileIndex);
  void reportBusy();  // emits busyChanged when busy() differs from the last report

  SessionContext* context_;
  TaskRunner* runner_ = nullptr;
  std::optional<Request> current_;
  std::deque<Request> queue_;
  bool reportedBusy_ = false;
};

}  // namespace attnscope
