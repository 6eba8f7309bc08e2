// What a path given as a dump names, told by stat() before anything opens it: a regular file
// is read; a folder is a run folder; a named pipe, socket or device is refused, since opening or
// reading one can block forever (`scan /dev/stdin`, a FIFO, a process substitution).
#pragma once

#include <string>

#include "core/result.h"

namespace attnscope {

enum class PathKind { missing, regular, directory, fifo, socket, char_device, block_device, other };

// The kind of what `path` names, symbolic links followed; missing when stat() fails.
PathKind path_kind(const std::string& path);

// "a named pipe (FIFO)", "a socket", ...: for messages.
const char* path_kind_text(PathKind kind);

// Ok for a regular file. Else an io Error: "PATH: not a regular file (it is a named pipe
// (FIFO))" with a hint to save the data to a file first, "PATH: is a directory, ..." or
// "PATH: cannot open: No such file or directory".
Status check_dump_file(const std::string& path);

}  // namespace attnscope
