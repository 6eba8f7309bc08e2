// Waiting for a dump to grow, for `scan --follow`: inotify on the dump's folder wakes on the
// writer closing the file, a rename onto it (atomic replace) and attnscope_record's ".writing"
// marker going away; no polling of the file.
#pragma once

#include <functional>
#include <string>

namespace attnscope {

class DumpFollower {
 public:
  // Watches the folder of `dump`; ok() is false (and error() says why) when inotify refuses.
  explicit DumpFollower(const std::string& dump);
  ~DumpFollower();
  DumpFollower(const DumpFollower&) = delete;
  DumpFollower& operator=(const DumpFollower&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }

  // Blocks until the dump changed and settled (no event for 300 ms and no live writer,
  // live_writer.h): true; or until `stop` returns true (checked every 100 ms): false.
  bool wait(const std::function<bool()>& stop);

 private:
  std::string dump_, name_, marker_name_, error_;
  int fd_ = -1;
};

}  // namespace attnscope
