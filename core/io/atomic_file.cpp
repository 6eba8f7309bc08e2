// AtomicFile: hidden temporary + fsync + rename + directory fsync, with clean-up of the
// temporaries of dead writers (their PID is part of the name).
#include "core/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace attnscope {

namespace fs = std::filesystem;

struct AtomicFile::State {
  std::string target, temp;
  bool done = false;  // committed or discarded
};

namespace {

std::string directory_of(const std::string& target) {
  const fs::path parent = fs::path(target).parent_path();
  return parent.empty() ? "." : parent.string();
}

Error io_error(const std::string& target, const std::string& what, int error) {
  return make_error(ErrorCode::io, target + ": " + what + ": " + std::strerror(error),
                    "check that the directory exists, is writable and has space");
}

// fsync of a path opened with `flags`; errno-style result.
int sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return rc;
}

// Removes ".NAME.PID-N.tmp" files of `target` whose PID no longer runs.
void remove_stale(const std::string& target) {
  const std::string prefix = fs::path(atomic_temp_prefix(target)).filename().string();
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(directory_of(target), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.size() < prefix.size() + 4 ||
        name.compare(name.size() - 4, 4, ".tmp") != 0) {
      continue;
    }
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      fs::remove(entry.path(), ec);
    }
  }
}

}  // namespace

std::string atomic_temp_prefix(const std::string& target) {
  const fs::path path(target);
  return (fs::path(directory_of(target)) / ("." + path.filename().string() + ".")).string();
}

Result<AtomicFile> AtomicFile::create(const std::string& target) {
  static std::atomic<int> counter{0};
  std::error_code ec;
  if (fs::is_directory(target, ec)) {
    return make_error(ErrorCode::io, target + ": is a directory", "name a file to write");
  }
  remove_stale(target);
  auto state = std::make_unique<State>();
  state->target = target;
  for (int attempt = 0;; ++attempt) {
    state->temp = atomic_temp_prefix(target) + std::to_string(::getpid()) + "-" +
                  std::to_string(counter++) + ".tmp";
    const int fd = ::open(state->temp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      break;
    }
    if (errno != EEXIST || attempt > 100) {
      return io_error(target, "cannot create a temporary file in " + directory_of(target), errno);
    }
  }
  return AtomicFile(std::move(state));
}

AtomicFile::AtomicFile(std::unique_ptr<State> state) : state_(std::move(state)) {}
AtomicFile::AtomicFile(AtomicFile&&) noexcept = default;
AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    discard();
    state_ = std::move(other.state_);
  }
  return *this;
}
AtomicFile::~AtomicFile() {
  discard();
}

const std::string& AtomicFile::target() const {
  return state_->target;
}
const std::string& AtomicFile::temp_path() const {
  return state_->temp;
}

Status AtomicFile::commit() {
  if (!state_ || state_->done) {
    return make_error(ErrorCode::invalid_argument, "AtomicFile: commit after commit / discard");
  }
  if (const int error = sync_path(state_->temp, O_RDONLY)) {
    discard();
    return io_error(state_->target, "cannot sync the written data", error);
  }
  if (::rename(state_->temp.c_str(), state_->target.c_str()) != 0) {
    const int error = errno;
    discard();
    return io_error(state_->target, "cannot rename the temporary file over it", error);
  }
  state_->done = true;
  // The rename is durable once the directory entry is; failure here loses nothing written.
  sync_path(directory_of(state_->target), O_RDONLY | O_DIRECTORY);
  return Ok{};
}

void AtomicFile::discard() {
  if (!state_ || state_->done) return;
  ::unlink(state_->temp.c_str());
  state_->done = true;
}

}  // namespace attnscope
