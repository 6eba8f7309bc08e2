// probe_dump: posix_spawn attnscope-probe on the file with its stdout on a pipe, wait with a
// deadline while reading what it says, and classify how it ended (clean exit, refusal,
// unreadable data, crash signal, sanitizer / abnormal exit, timeout).
#include "core/io/dump_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

extern char** environ;

namespace attnscope {

namespace fs = std::filesystem;

namespace {

constexpr const char* kProbeName = "attnscope-probe";

const char* const kCorruptHint =
    "the file is corrupt or crafted; re-export it from the original tensors (h5py or the "
    "attnscope_record hook)";

// What the probe said on stdout (see the protocol in dump_probe.h), fed as bytes arrive.
class ProbeReport {
 public:
  void feed(const char* data, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      if (data[i] != '\n') {
        if (partial_.size() < kMaxLine) partial_ += data[i];
        continue;
      }
      line(partial_);
      partial_.clear();
    }
  }
  std::string reading, error, hint;  // the last dataset being read; the data error

 private:
  static constexpr size_t kMaxLine = 1 << 16;
  void line(const std::string& text) {
    const size_t space = text.find(' ');
    const std::string key = text.substr(0, space);
    const std::string value = space == std::string::npos ? "" : text.substr(space + 1);
    if (key == kProbeReadingLine) reading = value;
    if (key == kProbeErrorLine) error = value;
    if (key == kProbeHintLine) hint = value;
  }
  std::string partial_;
};

// Reads whatever the probe has written so far; false at end of file or on an error.
bool drain(int fd, ProbeReport& report) {
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got > 0) {
      report.feed(buffer, static_cast<size_t>(got));
      continue;
    }
    return got < 0 && (errno == EAGAIN || errno == EINTR);
  }
}

Error probe_error(const std::string& path, const ProbeReport& report, const std::string& what) {
  if (report.reading.empty()) {
    return make_error(ErrorCode::format,
                      path + ": the HDF5 library " + what +
                          " while reading the file's metadata (in attnscope's probe process); "
                          "attnscope did not open it",
                      kCorruptHint);
  }
  return make_error(ErrorCode::format,
                    path + ": " + report.reading + ": the HDF5 library " + what +
                        " while reading the dataset's data (in attnscope's probe process); "
                        "attnscope did not open the file",
                    kCorruptHint);
}

// Waits for the probe, reading its stdout from `fd`; false when `deadline` passed first.
bool wait_probe(pid_t pid, int fd, std::chrono::steady_clock::time_point deadline,
                ProbeReport& report, int& status) {
  bool open = true;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) {
      if (open) drain(fd, report);  // the probe has exited: the rest of its output is buffered
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) return false;
    if (open) {
      pollfd waiting = {fd, POLLIN, 0};
      ::poll(&waiting, 1, 20);
      open = drain(fd, report);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace

std::string find_probe_executable() {
  if (const char* env = std::getenv("ATTNSCOPE_PROBE")) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  // Installed: next to the program; build tree: app/probe/ seen from app/ (GUI) or app/cli/.
  for (const fs::path& candidate :
       {self.parent_path() / kProbeName, self.parent_path() / "probe" / kProbeName,
        self.parent_path().parent_path() / "probe" / kProbeName}) {
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
      return candidate.string();
    }
  }
  return {};
}

Status probe_dump(const std::string& path, const ProbeOptions& options) {
  const std::string exe = options.executable.empty() ? find_probe_executable() : options.executable;
  if (exe.empty()) return Ok{};
  std::vector<std::string> args = {exe, path, "--sample-bytes",
                                   std::to_string(options.sample_bytes)};
  if (options.allow_external) args.push_back("--allow-external");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2];
  if (::pipe2(out, O_CLOEXEC | O_NONBLOCK) != 0) {
    return make_error(ErrorCode::io, path + ": cannot start the probe: " + std::strerror(errno),
                      "the process may be out of file descriptors");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    return make_error(ErrorCode::io,
                      path + ": cannot start the probe " + exe + ": " + std::strerror(spawned),
                      "set ATTNSCOPE_PROBE to the attnscope-probe executable");
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options.timeout_seconds));
  ProbeReport report;
  int status = 0;
  const bool finished = wait_probe(pid, out[0], deadline, report, status);
  ::close(out[0]);
  if (!finished) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", options.timeout_seconds);
    return probe_error(path, report, std::string("did not finish within ") + seconds + " s (hang)");
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return probe_error(
        path, report,
        std::string("crashed (signal ") + std::to_string(sig) + ", " + strsignal(sig) + ")");
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == kProbeReadable || code == kProbeRefused) return Ok{};
  if (code == kProbeDataUnreadable && !report.error.empty()) {
    return make_error(ErrorCode::format, report.error + " (found by attnscope's probe)",
                      report.hint.empty() ? kCorruptHint : report.hint);
  }
  return probe_error(path, report,
                     "failed abnormally (probe exit status " + std::to_string(code) +
                         ", e.g. a memory error caught by a sanitizer)");
}

}  // namespace attnscope
