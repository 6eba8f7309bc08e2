// Who is writing a dump right now: attnscope_record's marker file next to the dump
// (DUMP.writing: "pid host" while a step is being written, removed after), or another process
// holding HDF5's exclusive file lock. Readers never take HDF5 locks (a viewer must not stop a
// recording); they use this to say "being written" instead of "corrupt" when a read fails.
#pragma once

#include <optional>
#include <string>

namespace attnscope {

// The marker attnscope_record keeps while it writes `dump`: dump + ".writing".
std::string writing_marker_path(const std::string& dump);

// "attnscope_record (pid 4242 on host gpu-7)" while the marker names a live process (a marker
// of a process of this host that no longer runs is stale and ignored), "a process holding its
// HDF5 write lock" when another process holds an exclusive lock on the file; nullopt otherwise.
std::optional<std::string> live_writer(const std::string& dump);

// Text to append to a read error of `dump` that a live writer explains ("; it is being written
// by ... - a training run still recording?"), and the hint that goes with it.
struct LiveWriterNote {
  std::string message;
  std::string hint;
};
std::optional<LiveWriterNote> live_writer_note(const std::string& dump);

}  // namespace attnscope
