// Background probe + DumpReader::open behind DumpOpener (see DumpOpener.h).
#include "app/gui/DumpOpener.h"

#include <QFile>
#include <QFileInfo>
#include <memory>

#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "core/io/dump_probe.h"
#include "core/io/run_folder.h"

namespace attnscope {
namespace {

// What the job hands back: the reader, or the error that refused the file.
struct Opened {
  std::shared_ptr<const DumpReader> reader;
  Error error;
};

}  // namespace

DumpOpener::DumpOpener(SessionContext* context, QObject* parent)
    : QObject(parent), context_(context) {
  runner_ = new TaskRunner(QStringLiteral("attnscope-open"), TaskPriority::normal, this);
  connect(runner_, &TaskRunner::failed, this, [this](const QString& message) {
    if (!current_) return;
    emit failed(tr("Cannot open %1").arg(QFileInfo(current_->path).fileName()), message,
                tr("see the message for the file and problem"));
    finish(-1);
  });
}

void DumpOpener::open(const QString& path, Done done) {
  if (is_directory(QFile::encodeName(path).toStdString())) {
    openRun(path, std::move(done));
    return;
  }
  queue_.push_back({path, {}, -1, std::move(done)});
  reportBusy();
  if (!current_) next();
}

void DumpOpener::openRun(const QString& folder, Done done) {
  const Result<RunFolderListing> files = list_run_dumps(QFile::encodeName(folder).toStdString());
  if (!files) {
    emit failed(tr("Cannot open %1").arg(QFileInfo(folder).fileName()),
                QString::fromStdString(files.error().message),
                QString::fromStdString(files.error().hint));
    if (done) done(-1);
    return;
  }
  if (!files->skipped.empty()) {
    QStringList lines;
    for (const SkippedRunEntry& s : files->skipped) {
      lines << QString::fromStdString(s.error.message);
    }
    emit failed(tr("Not opened in %1").arg(QFileInfo(folder).fileName()), lines.join('\n'),
                QString::fromStdString(files->skipped.front().error.hint));
  }
  if (files->dumps.empty()) {
    if (done) done(-1);
    return;
  }
  // Shared by the ranks' callbacks: `done` gets the lowest rank opened after the last one.
  struct Pending {
    size_t left = 0;
    int first = -1;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = files->dumps.size();
  const QString run = QFileInfo(folder).absoluteFilePath();
  for (const RunDump& dump : order_run_dumps(files->dumps)) {
    const auto rankDone = [this, pending, done](int index) {
      if (index >= 0 && (pending->first < 0 || context_->file(index).run.rank <
                                                   context_->file(pending->first).run.rank)) {
        pending->first = index;
      }
      if (--pending->left == 0 && done) done(pending->first);
    };
    queue_.push_back(
        {QFile::decodeName(QByteArray::fromStdString(dump.path)), run, dump.rank, rankDone});
  }
  reportBusy();
  if (!current_) next();
}

void DumpOpener::next() {
  while (!current_ && !queue_.empty()) {
    current_ = std::move(queue_.front());
    queue_.pop_front();
    if (const int existing = context_->indexOfFile(current_->path); existing >= 0) {
      finish(existing);
      return;  // finish() went on with the queue
    }
    const QString path = current_->path;
    const RunMember run{current_->run, current_->rank, {}};
    emit started(path);
    const std::string file = QFile::encodeName(path).toStdString();
    runner_->submit<Opened>(
        [file](const TaskControl&, QString*) -> std::shared_ptr<const Opened> {
          auto out = std::make_shared<Opened>();
          // A hostile file that crashes HDF5 itself is opened first in the attnscope-probe
          // process, which hands back the case listing and the cases it could not read.
          Result<DumpReader> reader = open_untrusted_dump(file);
          if (reader) {
            out->reader = std::make_shared<const DumpReader>(std::move(reader).value());
          } else {
            out->error = reader.error();
          }
          return out;
        },
        [this, path, run](std::shared_ptr<const Opened> opened) {
          if (!opened->reader) {
            emit failed(tr("Cannot open %1").arg(QFileInfo(path).fileName()),
                        QString::fromStdString(opened->error.message),
                        QString::fromStdString(opened->error.hint));
            finish(-1);
            return;
          }
          RunMember member = run;
          if (!member.folder.isEmpty()) {  // the rank attribute wins over the name's
            const RankIdentity& id = opened->reader->rank_identity();
            if (id.rank >= 0) member.rank = id.rank;
            member.host = QString::fromStdString(id.host);
          }
          finish(context_->adoptFile(path, opened->reader, member));
        });
  }
}

void DumpOpener::finish(int fileIndex) {
  Done done = std::move(current_->done);
  current_.reset();
  if (done) done(fileIndex);
  next();
  reportBusy();
}

void DumpOpener::reportBusy() {
  if (busy() == reportedBusy_) return;
  reportedBusy_ = busy();
  emit busyChanged(reportedBusy_);
}

void DumpOpener::cancel() {
  if (!busy()) return;
  runner_->cancel();
  std::deque<Request> dropped = std::move(queue_);
  queue_.clear();
  if (current_) dropped.push_front(std::move(*current_));
  current_.reset();
  reportBusy();
  for (Request& r : dropped) {
    if (r.done) r.done(-1);
  }
}

}  // namespace attnscope
