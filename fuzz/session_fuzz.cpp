// libFuzzer entry point over the sidecar session loader (issue 42): one input = the bytes of a
// dump's `<dump>.attnscope.json`. SessionFile::load reads it read-only (as `attnscope-cli
// export` does) and repairing (as the window does: a corrupt or oversized file is moved aside),
// then a save and a second load must keep every annotation it read, readable or kept verbatim.
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <cstdlib>

#include "app/export/SessionFile.h"
#include "fuzz/fuzz_checks.h"

namespace {

QTemporaryDir* scratch = nullptr;

int annotations(const attnscope::SessionFile& s) {
  int n = 0;
  for (const attnscope::CaseSession& c : s.cases) n += c.annotations.size() + c.unreadable.size();
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  static QCoreApplication app(*argc, *argv);
  scratch = new QTemporaryDir;
  attnscope::fuzz::require(scratch->isValid());
  // The per-user fallback of QStandardPaths lands in the scratch folder too.
  qputenv("XDG_DATA_HOME", QFile::encodeName(scratch->filePath(QStringLiteral("data"))));
  qputenv("XDG_CONFIG_HOME", QFile::encodeName(scratch->filePath(QStringLiteral("config"))));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using attnscope::SessionFile;
  using attnscope::fuzz::require;
  QDir dir(scratch->path());
  dir.removeRecursively();
  QDir().mkpath(scratch->path());
  const QString dump = scratch->filePath(QStringLiteral("d.h5"));
  QFile sidecar(SessionFile::besidePath(dump));
  require(sidecar.open(QIODevice::WriteOnly));
  sidecar.write(reinterpret_cast<const char*>(data), static_cast<qint64>(size));
  sidecar.close();
  SessionFile::load(dump, /*repair=*/false);
  SessionFile session = SessionFile::load(dump, /*repair=*/true);
  const int read = annotations(session);
  QString error;
  if (!session.save(&error)) return 0;
  const SessionFile again = SessionFile::load(dump, /*repair=*/false);
  require(annotations(again) == read);
  return 0;
}
