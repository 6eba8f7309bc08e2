// Opens dumps off the GUI thread. Opening runs the attnscope-probe child process, which
// discovers every case of the file (seconds for thousands of cases) and test-reads its data,
// then opens the file with the probe's listing (open_untrusted_dump); both run as a job of a
// TaskRunner, one file after the other in request order, then the reader is handed to
// SessionContext::adoptFile on the GUI thread. A run folder opens as every dump in it
// (core/io/run_folder.h), each a rank of the run, through the same queue. Cancel drops the
// running open's result and every queued request.
#pragma once

#include <QObject>
#include <QString>
#include <cstdint>
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

  // Queues FILE; an already open file completes without a job when its turn comes. A folder
  // queues each of its dumps in rank order; `done` then gets the lowest rank that opened, once
  // the last one has finished (-1 when none opened, or the folder holds no dump: `failed`).
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
    QString run;        // the run folder of a rank (absolute); empty for a dump on its own
    int64_t rank = -1;  // the rank it takes without a rank attribute (order_run_dumps)
    Done done;
  };

  void openRun(const QString& folder, Done done);
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
