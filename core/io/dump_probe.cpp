// probe_dump: posix_spawn attnscope-probe on the file, wait with a deadline, and classify how
// it ended (clean exit, refusal, crash signal, sanitizer / abnormal exit, timeout).
#include "core/io/dump_probe.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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

Error probe_error(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::format,
                    path + ": the HDF5 library " + what +
                        " while reading the file's metadata (in attnscope's probe process); "
                        "attnscope did not open it",
                    "the file is corrupt or crafted; re-export it from the original tensors "
                    "(h5py or the attnscope_record hook)");
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
  std::vector<std::string> args = {exe, path};
  if (options.allow_external) args.push_back("--allow-external");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return make_error(ErrorCode::io,
                      path + ": cannot start the probe " + exe + ": " + std::strerror(spawned),
                      "set ATTNSCOPE_PROBE to the attnscope-probe executable");
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(options.timeout_seconds);
  int status = 0;
  for (auto pause = std::chrono::microseconds(200);;
       pause = std::min(pause * 2, decltype(pause)(20000))) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return Ok{};
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", options.timeout_seconds);
      return probe_error(path, std::string("did not finish within ") + seconds + " s (hang)");
    }
    std::this_thread::sleep_for(pause);
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return probe_error(
        path, std::string("crashed (signal ") + std::to_string(sig) + ", " + strsignal(sig) + ")");
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 0 || code == 2) return Ok{};
  return probe_error(path, "failed abnormally (probe exit status " + std::to_string(code) +
                               ", e.g. a memory error caught by a sanitizer)");
}

}  // namespace attnscope
