// Following dumps that grow (see DumpWatcher.h).
#include "app/gui/DumpWatcher.h"

#include <QDateTime>
#include <QFile>
#include <QFileInfo>
#include <QFileSystemWatcher>
#include <memory>

#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "core/io/dump_probe.h"
#include "core/io/live_writer.h"

namespace attnscope {
namespace {

constexpr int kSettleMs = 400;

struct Reopened {
  std::shared_ptr<const DumpReader> reader;  // null when the reopen failed (a step half-written)
};

bool isHdf5(const OpenDump& dump) {
  return dump.reader->format() == "hdf5";
}

// What tells a changed file: its size and modification time.
QPair<qint64, qint64> stamp(const QString& path) {
  const QFileInfo info(path);
  return {info.size(), info.lastModified().toMSecsSinceEpoch()};
}

}  // namespace

DumpWatcher::DumpWatcher(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context), watcher_(new QFileSystemWatcher(this)) {
  runner_ = new TaskRunner(QStringLiteral("attnscope-follow"), TaskPriority::background, this);
  settle_.setSingleShot(true);
  settle_.setInterval(kSettleMs);
  connect(&settle_, &QTimer::timeout, this, &DumpWatcher::reloadNext);
  connect(watcher_, &QFileSystemWatcher::fileChanged, this, &DumpWatcher::changed);
  connect(watcher_, &QFileSystemWatcher::directoryChanged, this, &DumpWatcher::changed);
  connect(context_, &SessionContext::filesChanged, this, &DumpWatcher::watchOpenFiles);
}

void DumpWatcher::watchOpenFiles() {
  for (int i = 0; i < context_->fileCount(); ++i) {
    const OpenDump& dump = context_->file(i);
    if (!isHdf5(dump)) continue;  // bug-report files are not written into
    // A rename onto the dump makes the watcher drop it: it is added again on each change.
    if (!watcher_->files().contains(dump.path) && QFileInfo::exists(dump.path)) {
      watcher_->addPath(dump.path);
    }
    if (!stamps_.contains(dump.path)) stamps_.insert(dump.path, stamp(dump.path));
    const QString folder = QFileInfo(dump.path).absolutePath();
    if (!watcher_->directories().contains(folder)) watcher_->addPath(folder);
  }
}

void DumpWatcher::changed(const QString& path) {
  for (int i = 0; i < context_->fileCount(); ++i) {
    const OpenDump& dump = context_->file(i);
    if (!isHdf5(dump)) continue;
    const bool folder = path == QFileInfo(dump.path).absolutePath();
    // A folder event (another file, the marker) counts when the dump itself differs.
    if (path == dump.path || (folder && stamp(dump.path) != stamps_.value(dump.path))) {
      changed_.insert(dump.path);
    }
  }
  if (!changed_.isEmpty()) settle_.start();  // restarts: 400 ms after the last change
}

void DumpWatcher::reloadNext() {
  if (!reloading_.isEmpty() || changed_.isEmpty()) return;
  const QString path = *changed_.begin();
  const std::string file = QFile::encodeName(path).toStdString();
  if (live_writer(file)) {  // a step is being written: wait for its end
    settle_.start();
    return;
  }
  changed_.remove(path);
  stamps_.insert(path, stamp(path));
  reloading_ = path;
  runner_->submit<Reopened>(
      [file](const TaskControl&, QString*) -> std::shared_ptr<const Reopened> {
        auto out = std::make_shared<Reopened>();
        Result<DumpReader> reader = open_untrusted_dump(file);
        if (reader) out->reader = std::make_shared<const DumpReader>(std::move(reader).value());
        return out;
      },
      [this, path](std::shared_ptr<const Reopened> reopened) {
        reloading_.clear();
        const int index = context_->indexOfFile(path);
        if (reopened->reader && index >= 0) {
          const size_t before = context_->file(index).reader->cases().size();
          const size_t after = reopened->reader->cases().size();
          if (after > before) {
            context_->refreshFile(index, reopened->reader);
            emit followed(path, static_cast<int>(after - before));
          }
        }
        watchOpenFiles();
        if (!changed_.isEmpty()) settle_.start();
      });
}

}  // namespace attnscope
