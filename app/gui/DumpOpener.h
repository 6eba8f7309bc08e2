// Opens dumps off the GUI thread. Opening runs the attnscope-probe child process and
// DumpReader::open, which discovers every case of the file eagerly (seconds for thousands of
// cases); both run as a job of a TaskRunner (latest wins, cancel drops the result), then the
// reader is handed to SessionContext::adoptFile on the GUI thread and a case is selected.
#pragma once

#include <QObject>
#include <QString>

namespace attnscope {

class SessionContext;
class TaskRunner;

class DumpOpener : public QObject {
  Q_OBJECT

 public:
  explicit DumpOpener(SessionContext* context, QObject* parent = nullptr);

  // Opens FILE in the background and then selects casePath (empty: the first case). The
  // outcome comes as opened or failed; an already open file is selected at once.
  void open(const QString& path, const QString& casePath = {});
  // Forgets the pending open (the reader job finishes its discovery, its result is dropped).
  void cancel();
  bool busy() const;
  TaskRunner* runner() const { return runner_; }

 signals:
  void opened(int fileIndex);
  void failed(const QString& title, const QString& message, const QString& hint);

 private:
  void select(int fileIndex, const QString& casePath);

  SessionContext* context_;
  TaskRunner* runner_ = nullptr;
};

}  // namespace attnscope
