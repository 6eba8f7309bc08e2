// DumpFollower over Linux inotify (see dump_follower.h).
#include "dump_follower.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "core/io/live_writer.h"

namespace attnscope {

namespace {

constexpr int kTickMs = 100;
constexpr auto kSettle = std::chrono::milliseconds(300);

}  // namespace

DumpFollower::DumpFollower(const std::string& dump) : dump_(dump) {
  const std::filesystem::path path(dump);
  name_ = path.filename().string();
  marker_name_ = std::filesystem::path(writing_marker_path(dump)).filename().string();
  const std::string folder = path.has_parent_path() ? path.parent_path().string() : ".";
  fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd_ >= 0 &&
      inotify_add_watch(fd_, folder.c_str(),
                        IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MODIFY) < 0) {
    close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0) error_ = "cannot watch " + folder + ": " + std::strerror(errno);
}

DumpFollower::~DumpFollower() {
  if (fd_ >= 0) close(fd_);
}

bool DumpFollower::wait(const std::function<bool()>& stop) {
  using Clock = std::chrono::steady_clock;
  bool changed = false;
  Clock::time_point last_event;
  alignas(inotify_event) char buffer[4096];
  while (!stop()) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, kTickMs) > 0) {
      ssize_t n;
      while ((n = read(fd_, buffer, sizeof buffer)) > 0) {
        for (char* at = buffer; at < buffer + n;) {
          const auto* e = reinterpret_cast<const inotify_event*>(at);
          const std::string name = e->len > 0 ? e->name : "";
          if (name == name_ || name == marker_name_) {
            changed = true;
            last_event = Clock::now();
          }
          at += sizeof(inotify_event) + e->len;
        }
      }
    }
    if (changed && Clock::now() - last_event >= kSettle && !live_writer(dump_)) return true;
  }
  return false;
}

}  // namespace attnscope
