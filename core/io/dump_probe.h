// Probing untrusted dumps in a child process (issue 7; every format of dump_format.h, issue 16:
// the .pt / .npz / .safetensors readers are attnscope's own and fuzzed, but a reader bug must
// not take the CLI or GUI down either). HDF5 1.10 itself can fault on hostile
// metadata (fuzzing found a heap over-read in H5Oopen on a corrupt object header, see
// tests/data/bad/fuzz_*.h5) or data (a corrupt chunk index or compressed chunk, in H5Dread),
// which no Result can catch. probe_dump() first opens the file in the attnscope-probe
// executable (DumpReader::open, then a test read of every case's data) and gets its listing
// back; a crash, hang or runaway allocation on metadata refuses the file, one on a case's
// data marks that case broken (the probe runs again without it), and the caller never reads a
// broken case.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/io/hdf5_dump.h"
#include "core/memory_budget.h"
#include "core/result.h"

namespace attnscope {

// Protocol between attnscope-probe and probe_dump(). Exit status: readable, refused at open
// (the caller's own open reports why), or data unreadable (older probes). Stdout lines
// "KEY TEXT": "checking /case" before a case's data is read and "checking" (empty) after the
// last, "reading /case/q" before each dataset's data is read, "error MESSAGE" and
// "hint HINT" before kProbeDataUnreadable, and before kProbeReadable the listing
// (dump_listing.h: "listing VERSION BYTES CHECKSUM" and the payload): the cases, the rejected
// groups and the cases whose data could not be read. `--skip /case` (repeatable) lists such a
// case as broken without reading it.
inline constexpr int kProbeReadable = 0;
inline constexpr int kProbeRefused = 2;
inline constexpr int kProbeDataUnreadable = 3;
inline constexpr const char* kProbeCheckingLine = "checking";
inline constexpr const char* kProbeReadingLine = "reading";
inline constexpr const char* kProbeErrorLine = "error";
inline constexpr const char* kProbeHintLine = "hint";
inline constexpr const char* kProbeListingLine = "listing";
// The object named on a "checking" line while the probe test-reads the health statistics; a
// run that dies there is repeated with `--skip /health`, which lists them unreadable.
inline constexpr const char* kProbeHealthObject = "/health";
// Bytes read at most per test read of one tensor (DumpReader::check_data).
inline constexpr int64_t kProbeSampleBytes = int64_t{1} << 20;
// Probe runs per file at most: a crash or hang while reading one case's data marks that case
// broken and the probe runs again skipping it; past this many runs the file is refused.
inline constexpr int kMaxProbeRuns = 5;

// A probe run may always hold this much: its libraries alone take tens of MiB, and a budget set
// low to refuse big analyses must not refuse every file.
inline constexpr int64_t kProbeMemoryFloor = int64_t{1} << 30;

// The memory budget in force (core/memory_budget.h), at least kProbeMemoryFloor; the origin
// says which ("the memory budget, from --memory-budget", "the probe's minimum, above ...").
MemoryBudget probe_memory_limit();

struct ProbeOptions {
  bool allow_external = false;
  // Each probe run is killed after this long (a hang): set_probe_timeout() (the command
  // lines' --probe-timeout), else $ATTNSCOPE_PROBE_TIMEOUT (seconds), else 120.
  double timeout_seconds = default_probe_timeout();
  // Each probe run is killed when its resident memory exceeds this (runaway allocation in
  // the HDF5 library): probe_memory_limit().
  MemoryBudget memory_limit = probe_memory_limit();
  int64_t sample_bytes = kProbeSampleBytes;
  std::string executable;  // empty: find_probe_executable()

  static double default_probe_timeout();
};

// A probe timeout as the command lines take it: a number of seconds > 0 and at most 1e6
// ("0.5", "30", "1e3"); nullopt otherwise.
std::optional<double> parse_probe_timeout(const std::string& text);

// Sets the process-wide default of ProbeOptions::timeout_seconds (wins over the environment
// variable); `seconds` as parse_probe_timeout accepts. Thread-safe.
void set_probe_timeout(double seconds);

// $ATTNSCOPE_PROBE, else attnscope-probe next to the running executable or in ../probe/ (the
// build tree's app/probe); empty when none exists.
std::string find_probe_executable();

// What the probe found: the file's listing, or nullopt when no probe executable exists or
// the probe refused the file at open (the caller's own open then reports that error).
struct ProbeOutcome {
  std::optional<DumpListing> listing;
  int runs = 0;  // probe processes started
};

// Runs the probe (again, skipping a case whose data read crashed or hung it, up to
// kMaxProbeRuns runs). An Error (format) naming the file when the probe crashed, was killed,
// exceeded the timeout or the memory limit while reading metadata, or kept failing on data
// past kMaxProbeRuns runs; an Error (io) when its listing is malformed.
Result<ProbeOutcome> probe_dump(const std::string& path, const ProbeOptions& options = {});

// Opens an untrusted dump: probe_dump, then DumpReader::open_listed with its listing (no
// second discovery), or DumpReader::open when no listing came back. Broken cases are in
// broken(); a file whose cases are all broken is refused with the first one's error.
Result<DumpReader> open_untrusted_dump(const std::string& path, const ProbeOptions& probe = {},
                                       const OpenOptions& options = {});

}  // namespace attnscope
