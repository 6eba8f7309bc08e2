// Telling a dump path's kind with stat() before any open (see input_path.h).
#include "core/io/input_path.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace attnscope {

PathKind path_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return PathKind::missing;
  if (S_ISREG(st.st_mode)) return PathKind::regular;
  if (S_ISDIR(st.st_mode)) return PathKind::directory;
  if (S_ISFIFO(st.st_mode)) return PathKind::fifo;
  if (S_ISSOCK(st.st_mode)) return PathKind::socket;
  if (S_ISCHR(st.st_mode)) return PathKind::char_device;
  if (S_ISBLK(st.st_mode)) return PathKind::block_device;
  return PathKind::other;
}

const char* path_kind_text(PathKind kind) {
  switch (kind) {
    case PathKind::missing:
      return "missing";
    case PathKind::regular:
      return "a regular file";
    case PathKind::directory:
      return "a directory";
    case PathKind::fifo:
      return "a named pipe (FIFO)";
    case PathKind::socket:
      return "a socket";
    case PathKind::char_device:
      return "a character device";
    case PathKind::block_device:
      return "a block device";
    case PathKind::other:
      break;
  }
  return "not a file";
}

Status check_dump_file(const std::string& path) {
  const PathKind kind = path_kind(path);
  const int stat_errno = errno;  // why stat() failed, for `missing`
  switch (kind) {
    case PathKind::regular:
      return Ok{};
    case PathKind::missing:
      return make_error(ErrorCode::io, path + ": cannot open: " + std::strerror(stat_errno),
                        "check the path and its permissions");
    case PathKind::directory:
      return make_error(ErrorCode::io, path + ": is a directory, not a dump file",
                        "pass the .h5 file inside it, or the folder of a multi-rank run to "
                        "the commands that take a RUN_FOLDER");
    default:
      return make_error(ErrorCode::io,
                        path + ": not a regular file (it is " + path_kind_text(kind) + ")",
                        "attnscope reads dumps from files; save the stream to a file first "
                        "(e.g. `cat > dump.h5`) and pass that file");
  }
}

}  // namespace attnscope
