// Follows open dumps that a training run is still recording into (issue 21): a
// QFileSystemWatcher on each open HDF5 dump and its folder (a rename onto the dump, the
// recorder's ".writing" marker) wakes it; 400 ms after the last change, with no live writer
// (core/io/live_writer.h), the dump is reopened in the background (probe, as any open) and,
// when it lists new cases, SessionContext::refreshFile adds them: the browser, the step x layer
// map and the scan badges fill in. No polling: nothing runs while the files stay unchanged.
#pragma once

#include <QHash>
#include <QObject>
#include <QPair>
#include <QSet>
#include <QString>
#include <QTimer>

class QFileSystemWatcher;

namespace attnscope {

class SessionContext;
class TaskRunner;

class DumpWatcher : public QObject {
  Q_OBJECT

 public:
  explicit DumpWatcher(SessionContext* context, QObject* parent = nullptr);

 signals:
  // A dump grew: `added` new cases (for the status bar).
  void followed(const QString& file, int added);

 private:
  void watchOpenFiles();
  void changed(const QString& path);  // a watched file or folder changed
  void reloadNext();                  // the settle timer fired

  SessionContext* context_;
  QFileSystemWatcher* watcher_;
  TaskRunner* runner_;
  QTimer settle_;
  QSet<QString> changed_;                         // open dumps changed since their last reload
  QHash<QString, QPair<qint64, qint64>> stamps_;  // (size, mtime) at the last (re)open
  QString reloading_;                             // the dump being reopened, "" when none
};

}  // namespace attnscope
