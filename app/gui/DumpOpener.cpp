// Background probe + DumpReader::open behind DumpOpener (see DumpOpener.h).
#include "app/gui/DumpOpener.h"

#include <QFile>
#include <QFileInfo>
#include <memory>

#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "core/io/dump_probe.h"

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
  runner_ = new TaskRunner(QStringLiteral("attnscope-open"), QThread::InheritPriority, this);
  connect(runner_, &TaskRunner::failed, this, [this](const QString& message) {
    emit failed(tr("Cannot open dump"), message, tr("see the message for the file and problem"));
  });
}

void DumpOpener::open(const QString& path, const QString& casePath) {
  if (const int existing = context_->indexOfFile(path); existing >= 0) {
    select(existing, casePath);
    return;
  }
  const std::string file = QFile::encodeName(path).toStdString();
  runner_->submit(
      [file](const TaskControl&, QString*) -> TaskResult {
        auto out = std::make_shared<Opened>();
        // A hostile file that crashes HDF5 itself is opened first in the attnscope-probe process.
        if (const Status probed = probe_dump(file); !probed) {
          out->error = probed.error();
          return out;
        }
        Result<DumpReader> reader = DumpReader::open(file);
        if (reader) {
          out->reader = std::make_shared<const DumpReader>(std::move(reader).value());
        } else {
          out->error = reader.error();
        }
        return out;
      },
      [this, path, casePath](TaskResult r) {
        const auto opened = std::static_pointer_cast<const Opened>(r);
        if (!opened->reader) {
          emit failed(tr("Cannot open %1").arg(QFileInfo(path).fileName()),
                      QString::fromStdString(opened->error.message),
                      QString::fromStdString(opened->error.hint));
          return;
        }
        select(context_->adoptFile(path, opened->reader), casePath);
      });
}

void DumpOpener::cancel() {
  runner_->cancel();
}

bool DumpOpener::busy() const {
  return runner_->busy();
}

void DumpOpener::select(int fileIndex, const QString& casePath) {
  const auto& cases = context_->file(fileIndex).reader->cases();
  if (cases.empty()) {
    emit failed(tr("Empty dump"), tr("%1: no cases").arg(context_->file(fileIndex).path),
                tr("a case is a group holding datasets q, k and v"));
    return;
  }
  const QString wanted = casePath.isEmpty() ? QString::fromStdString(cases.front().path) : casePath;
  if (!context_->selectCase(fileIndex, wanted)) {
    emit failed(tr("Unknown case"),
                tr("%1: no case %2 in this dump").arg(context_->file(fileIndex).path, wanted),
                tr("the dump browser lists the cases of the file"));
    return;
  }
  emit opened(fileIndex);
}

}  // namespace attnscope
