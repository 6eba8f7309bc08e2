// The head compute of what the window shows: (case, batch, head) under the run choice. The input
// changes of one event-loop turn (a slider tick, a case change with its batch / head) make one
// request to the ComputeWorker, asking first for what the shown tab needs (the statistics for S,
// the forward for P / O); each part of the result goes to the SessionContext as it comes in.
#pragma once

#include <QObject>
#include <QString>

namespace attnscope {

class ComputeWorker;
class SessionContext;

class HeadComputeController : public QObject {
  Q_OBJECT

 public:
  explicit HeadComputeController(SessionContext* context, QObject* parent = nullptr);

  ComputeWorker* worker() const { return worker_; }
  // Requests made to the worker so far (one per turn of input changes).
  int requests() const { return requests_; }

 signals:
  // A result was handed to the context: "/case · computed in 12.3 ms" (or the forward's part).
  void computed(const QString& status);

 private:
  void request();
  void apply();

  SessionContext* context_;
  ComputeWorker* worker_;
  int requests_ = 0;
};

}  // namespace attnscope
