// probe_dump: posix_spawn attnscope-probe on the file with its stdout on a pipe, wait with a
// deadline and a memory limit while reading what it says, and classify how it ended (clean exit
// with a listing, refusal, crash signal, sanitizer / abnormal exit, timeout, memory); a crash,
// hang or runaway allocation inside one case's data reruns the probe without that case.
#include "core/io/dump_probe.h"

#include "core/io/dump_format.h"
#include "core/io/input_path.h"
#include "core/io/live_writer.h"
#include "core/io/probe_channel.h"
#include "core/io/sibling_program.h"
#include "core/memory_budget.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

extern char** environ;

namespace attnscope {

namespace fs = std::filesystem;

namespace {

constexpr const char* kProbeName = "attnscope-probe";

// set_probe_timeout's value; 0 = none.
std::atomic<double>& probe_timeout_override() {
  static std::atomic<double> seconds{0};
  return seconds;
}

const char* const kCorruptHint =
    "the file is corrupt or crafted; re-export it from the original tensors (h5py or the "
    "attnscope_record hook)";

const char* const kHangHint =
    "the file is corrupt or crafted (re-export it from the original tensors), or stored on a "
    "very slow or blocking file system: allow more seconds with --probe-timeout SECONDS or "
    "ATTNSCOPE_PROBE_TIMEOUT (default 120)";

const char* const kMemoryHint =
    "the file is corrupt or crafted (re-export it from the original tensors); if it is a real "
    "dump with very large metadata, allow more with --memory-budget SIZE or "
    "ATTNSCOPE_MEMORY_BUDGET";

// Reads whatever the probe has written so far; false at end of file or on an error.
bool drain(int fd, ProbeChannel& report) {
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

// The HDF5 library (or the reader of another format) `what` ("crashed (signal 11, ...)") in
// the probe: while reading metadata
// (the file is refused), while reading a case's data (`checking`, `reading`; the case is
// skipped) or the health statistics (they are not read).
Error probe_error(const std::string& path, const ProbeChannel& report, const std::string& what,
                  const char* hint = kCorruptHint) {
  const Container container = sniff_file(path);
  const std::string reader = container == Container::hdf5  ? "the HDF5 library "
                             : container == Container::zip ? "the .pt / .npz reader "
                                                           : "the .safetensors reader ";
  if (report.checking.empty()) {
    return make_error(ErrorCode::format,
                      path + ": " + reader + what +
                          " while reading the file's metadata (in attnscope's probe process); "
                          "attnscope did not open it",
                      hint);
  }
  if (report.checking == kProbeHealthObject) {
    return make_error(ErrorCode::format,
                      path + ": " + kProbeHealthObject + ": " + reader + what +
                          " while reading the health statistics (in attnscope's probe "
                          "process); attnscope does not read them",
                      hint);
  }
  const std::string object = report.reading.empty() ? report.checking : report.reading;
  return make_error(ErrorCode::format,
                    path + ": " + object + ": " + reader + what +
                        " while reading the dataset's data (in attnscope's probe process); "
                        "attnscope does not load this case",
                    hint);
}

// Resident bytes of process `pid` (/proc/PID/statm); 0 when unknown (it has just exited).
int64_t resident_bytes(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  int64_t pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

enum class ProbeWait { exited, timed_out, over_memory };

// Waits for the probe, reading its stdout from `fd`, until it exits, `deadline` passes or its
// resident memory exceeds `memory_limit` bytes (checked every <= 20 ms: HDF5 on a crafted
// file can allocate until the kernel's OOM killer picks some process of the machine). Watched
// from here rather than with setrlimit(RLIMIT_AS) in the child: sanitizer builds of the probe
// reserve terabytes of address space, and resident memory is what starves the machine.
ProbeWait wait_probe(pid_t pid, int fd, std::chrono::steady_clock::time_point deadline,
                     int64_t memory_limit, ProbeChannel& report, int& status) {
  bool open = true;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) {
      if (open) drain(fd, report);  // the probe has exited: the rest of its output is buffered
      return ProbeWait::exited;
    }
    if (std::chrono::steady_clock::now() > deadline) return ProbeWait::timed_out;
    if (resident_bytes(pid) > memory_limit) return ProbeWait::over_memory;
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
  return find_sibling_program(kProbeName, "probe", "ATTNSCOPE_PROBE");
}

namespace {

// How one probe run ended.
struct ProbeRun {
  ProbeChannel report;
  std::optional<Error> failure;  // crash / hang / abnormal exit / legacy data error
  bool refused = false;
};

ProbeRun run_probe(const std::string& exe, const std::string& path, const ProbeOptions& options,
                   const std::vector<std::string>& skip) {
  ProbeRun run;
  std::vector<std::string> args = {exe, path, "--sample-bytes",
                                   std::to_string(options.sample_bytes)};
  if (options.allow_external) args.push_back("--allow-external");
  for (const std::string& s : skip) args.insert(args.end(), {"--skip", s});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // Only the parent's end is non-blocking: a probe writing a large listing must block on a
  // full pipe, not lose what does not fit.
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    run.failure =
        make_error(ErrorCode::io, path + ": cannot start the probe: " + std::strerror(errno),
                   "the process may be out of file descriptors");
    return run;
  }
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
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
    run.failure = make_error(
        ErrorCode::io, path + ": cannot start the probe " + exe + ": " + std::strerror(spawned),
        "set ATTNSCOPE_PROBE to the attnscope-probe executable");
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(options.timeout_seconds));
  int status = 0;
  const ProbeWait waited =
      wait_probe(pid, out[0], deadline, options.memory_limit.bytes, run.report, status);
  ::close(out[0]);
  if (waited != ProbeWait::exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  if (waited == ProbeWait::timed_out) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", options.timeout_seconds);
    run.failure = probe_error(
        path, run.report, std::string("did not finish within ") + seconds + " s (hang)", kHangHint);
    return run;
  }
  if (waited == ProbeWait::over_memory) {
    const MemoryBudget& limit = options.memory_limit;
    run.failure = probe_error(
        path, run.report,
        "needed more than " + format_bytes(limit.bytes) + " of memory (" + limit.origin + ")",
        kMemoryHint);
    return run;
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    run.failure = probe_error(
        path, run.report,
        std::string("crashed (signal ") + std::to_string(sig) + ", " + strsignal(sig) + ")");
    return run;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == kProbeRefused) {
    run.refused = true;
  } else if (code == kProbeDataUnreadable && !run.report.error.empty()) {
    run.failure = make_error(ErrorCode::format, run.report.error + " (found by attnscope's probe)",
                             run.report.hint.empty() ? kCorruptHint : run.report.hint);
  } else if (code != kProbeReadable) {
    run.failure = probe_error(path, run.report,
                              "failed abnormally (probe exit status " + std::to_string(code) +
                                  ", e.g. a memory error caught by a sanitizer)");
  }
  return run;
}

// The probe's listing, with the errors of the cases it was told to skip filled in.
Result<DumpListing> take_listing(const std::string& path, const ProbeChannel& report,
                                 const std::map<std::string, Error>& skipped) {
  if (!report.listing_header || report.payload_pending()) {
    return make_error(
        ErrorCode::io,
        path + ": attnscope's probe process ended without a case listing" +
            (report.listing_problem.empty() ? "" : " (" + report.listing_problem + ")") +
            "; attnscope did not open the file",
        "the attnscope-probe executable may not match this attnscope build; "
        "reinstall attnscope or set ATTNSCOPE_PROBE to the matching probe");
  }
  Result<DumpListing> listing =
      decode_listing(*report.listing_header, report.listing_payload, path);
  if (!listing) return listing;
  for (BrokenCase& b : listing->broken) {
    if (auto it = skipped.find(b.info.stored_path()); it != skipped.end()) b.error = it->second;
  }
  if (auto it = skipped.find(kProbeHealthObject); it != skipped.end()) {
    listing->health_error = it->second;
  }
  return listing;
}

}  // namespace

std::optional<double> parse_probe_timeout(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double seconds = std::strtod(begin, &end);
  if (end == begin || *end != '\0' || !(seconds > 0 && seconds <= 1e6)) return std::nullopt;
  return seconds;
}

void set_probe_timeout(double seconds) {
  probe_timeout_override().store(seconds);
}

double ProbeOptions::default_probe_timeout() {
  if (const double set = probe_timeout_override().load(); set > 0) return set;
  if (const char* env = std::getenv("ATTNSCOPE_PROBE_TIMEOUT")) {
    if (const std::optional<double> seconds = parse_probe_timeout(env)) return *seconds;
  }
  return 120;
}

MemoryBudget probe_memory_limit() {
  const MemoryBudget budget = memory_budget();
  if (budget.bytes >= kProbeMemoryFloor) {
    return {budget.bytes, "the memory budget, from " + budget.origin};
  }
  return {kProbeMemoryFloor, "the probe's minimum, above the memory budget of " +
                                 format_bytes(budget.bytes) + " from " + budget.origin};
}

Result<ProbeOutcome> probe_dump(const std::string& path, const ProbeOptions& options) {
  if (Status file = check_dump_file(path); !file) return file.error();
  ProbeOutcome outcome;
  const std::string exe = options.executable.empty() ? find_probe_executable() : options.executable;
  if (exe.empty()) return outcome;
  std::map<std::string, Error> skipped;  // case -> why its data read failed the probe
  std::vector<std::string> skip;
  for (;;) {
    ProbeRun run = run_probe(exe, path, options, skip);
    ++outcome.runs;
    if (run.refused) return outcome;
    if (!run.failure) {
      Result<DumpListing> listing = take_listing(path, run.report, skipped);
      if (!listing) return listing.error();
      outcome.listing = std::move(*listing);
      return outcome;
    }
    // Metadata (no case being checked), a case skipped already, or too many runs: refuse.
    const std::string& culprit = run.report.checking;
    if (culprit.empty() || skipped.count(culprit) || outcome.runs >= kMaxProbeRuns) {
      if (!culprit.empty()) {
        run.failure->message += " (probe run " + std::to_string(outcome.runs) + " of at most " +
                                std::to_string(kMaxProbeRuns) +
                                "); attnscope did not open the file";
      }
      return *run.failure;
    }
    skipped.emplace(culprit, *run.failure);
    skip.push_back(culprit);
  }
}

Result<DumpReader> open_untrusted_dump(const std::string& path, const ProbeOptions& probe,
                                       const OpenOptions& options) {
  Result<ProbeOutcome> probed = probe_dump(path, probe);
  if (!probed) {
    // A probe that crashed on a file a training run is writing read a step half-written.
    Error e = probed.error();
    auto live = e.message.find("being written right now") == std::string::npos
                    ? live_writer_note(path)
                    : std::nullopt;
    if (live) {
      e.message += live->message;
      e.hint = live->hint;
    }
    return e;
  }
  if (!probed->listing) return DumpReader::open(path, options);
  return DumpReader::open_listed(path, std::move(*probed->listing), options);
}

}  // namespace attnscope
