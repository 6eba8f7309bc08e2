// Detection of a dump's live writer (see live_writer.h).
#include "core/io/live_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "core/io/input_path.h"

namespace attnscope {

namespace {

std::string host_name() {
  char name[256] = {0};
  return gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

// The marker's writer, when its process may still run.
std::optional<std::string> marker_writer(const std::string& dump) {
  if (path_kind(writing_marker_path(dump)) != PathKind::regular) return std::nullopt;
  std::ifstream in(writing_marker_path(dump));
  long long pid = 0;
  std::string host;
  if (!(in >> pid >> host) || pid <= 0) return std::nullopt;
  if (host == host_name() && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    return std::nullopt;  // stale: left by a run that died while writing
  }
  return "attnscope_record (pid " + std::to_string(pid) + " on " + host + ")";
}

// True when another process holds an exclusive flock on the file (HDF5's write lock).
bool write_locked(const std::string& dump) {
  const int fd = open(dump.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  const bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  if (!locked) flock(fd, LOCK_UN);
  close(fd);
  return locked;
}

}  // namespace

std::string writing_marker_path(const std::string& dump) {
  return dump + ".writing";
}

std::optional<std::string> live_writer(const std::string& dump) {
  if (auto writer = marker_writer(dump)) return writer;
  if (write_locked(dump)) return std::string("a process holding its HDF5 write lock");
  return std::nullopt;
}

std::optional<LiveWriterNote> live_writer_note(const std::string& dump) {
  const std::optional<std::string> writer = live_writer(dump);
  if (!writer) return std::nullopt;
  return LiveWriterNote{
      "; it is being written right now by " + *writer +
          " - a training run still recording? What was read may be a step half-written",
      "nothing is wrong with the file: open it again in a moment (between two steps); an open "
      "window adds the steps a run records by itself, attnscope-cli scan --follow scans them "
      "as they land; attnscope never stops a recording"};
}

}  // namespace attnscope
