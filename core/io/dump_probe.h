// Probing untrusted dumps in a child process (issue 7). HDF5 1.10 itself can fault on hostile
// metadata (fuzzing found a heap over-read in H5Oopen on a corrupt object header, see
// tests/data/bad/fuzz_*.h5), which no Result can catch. probe_dump() first opens the file in the
// attnscope-probe executable (DumpReader::open: discovery and validation of every case); a
// crash or a hang there becomes an Error and the caller never touches the file.
#pragma once

#include <string>

#include "core/result.h"

namespace attnscope {

struct ProbeOptions {
  bool allow_external = false;
  double timeout_seconds = 120;  // the probe is killed after this long (a hang)
  std::string executable;        // empty: find_probe_executable()
};

// $ATTNSCOPE_PROBE, else attnscope-probe next to the running executable or in ../probe/ (the
// build tree's app/probe); empty when none exists.
std::string find_probe_executable();

// Ok when the probe finished (exit 0, or 2 when it refused the file: the caller's own open then
// reports that error) or when no probe executable exists. An Error (format) naming the file
// when the probe crashed, was killed or exceeded the timeout.
Status probe_dump(const std::string& path, const ProbeOptions& options = {});

}  // namespace attnscope
