// Probing untrusted dumps in a child process (issue 7). HDF5 1.10 itself can fault on hostile
// metadata (fuzzing found a heap over-read in H5Oopen on a corrupt object header, see
// tests/data/bad/fuzz_*.h5) or data (a corrupt chunk index or compressed chunk, in H5Dread),
// which no Result can catch. probe_dump() first opens the file in the attnscope-probe
// executable (DumpReader::open, then DumpReader::check_data); a crash, a hang or unreadable
// data there becomes an Error naming the file (and the dataset being read), and the caller
// never touches the file.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"

namespace attnscope {

// Protocol between attnscope-probe and probe_dump(). Exit status: readable, refused at open
// (the caller's own open reports why), or data unreadable. Stdout lines "KEY TEXT": "reading
// /case/q" before each dataset's data is read, "error MESSAGE" and "hint HINT" before
// kProbeDataUnreadable, "cases N" before kProbeReadable.
inline constexpr int kProbeReadable = 0;
inline constexpr int kProbeRefused = 2;
inline constexpr int kProbeDataUnreadable = 3;
inline constexpr const char* kProbeReadingLine = "reading";
inline constexpr const char* kProbeErrorLine = "error";
inline constexpr const char* kProbeHintLine = "hint";
inline constexpr const char* kProbeCasesLine = "cases";
// Bytes read at most per test read of one tensor (DumpReader::check_data).
inline constexpr int64_t kProbeSampleBytes = int64_t{1} << 20;

struct ProbeOptions {
  bool allow_external = false;
  double timeout_seconds = 120;  // the probe is killed after this long (a hang)
  int64_t sample_bytes = kProbeSampleBytes;
  std::string executable;  // empty: find_probe_executable()
};

// $ATTNSCOPE_PROBE, else attnscope-probe next to the running executable or in ../probe/ (the
// build tree's app/probe); empty when none exists.
std::string find_probe_executable();

// Ok when the probe finished (kProbeReadable, or kProbeRefused: the caller's own open then
// reports that error) or when no probe executable exists. An Error (format) naming the file
// when the data of a dataset cannot be read (the probe's message and hint), or when the probe
// crashed, was killed or exceeded the timeout (naming the dataset whose data it was reading,
// if any).
Status probe_dump(const std::string& path, const ProbeOptions& options = {});

}  // namespace attnscope
