// A run folder: the dumps of one multi-rank run in one directory. attnscope_record under
// torch.distributed writes FOLDER/rank_RRRRR.h5 (one file per rank, root attributes rank,
// world_size, local_rank, host); a folder of dumps gathered by hand works the same way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace attnscope {

bool is_directory(const std::string& path);

// A dump-named entry of a run folder that is not read, and why.
struct SkippedRunEntry {
  std::string path;
  Error error;  // "not a regular file (it is a named pipe (FIFO))", "symbolic link ... outside"
};

struct RunFolderListing {
  std::vector<std::string> dumps;        // sorted by path
  std::vector<SkippedRunEntry> skipped;  // sorted by path
};

// The dump files under `dir`, subfolders included (to a depth of 4; symbolic links to folders
// are not entered). A dump is a file named *.h5, *.hdf5, *.pt, *.pth, *.npz or *.safetensors
// whose name does not start with '.'; its format is still told from its bytes when it is
// opened. Such a name that is not a regular file (a FIFO, a socket, a device, a dangling link),
// or a symbolic link that resolves outside `dir` (unless `follow_outside_links`), is listed in
// `skipped` without being opened. Fails (io) naming the folder when it cannot be read, or
// (not_found) when it holds no dump and nothing skipped.
Result<RunFolderListing> list_run_dumps(const std::string& dir, bool follow_outside_links = false);

// 3 for ".../rank_00003.h5", "rank3.pt", "rank-3.npz"; nullopt without such a name.
std::optional<int64_t> rank_in_name(const std::string& path);

// A dump of a run folder and the rank it takes when it has no rank attribute.
struct RunDump {
  std::string path;
  int64_t rank = 0;
};

// A run folder's dumps (list_run_dumps) in the order every reader of a run takes them: by the
// rank in their names (rank_in_name), then the others by path. Each gets the rank in its name,
// else its position in that order; a dump's rank attribute, when it has one, wins over both.
std::vector<RunDump> order_run_dumps(const std::vector<std::string>& files);

}  // namespace attnscope
