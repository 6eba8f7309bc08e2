// A run folder: the dumps of one multi-rank run in one directory. attnscope_record under
// torch.distributed writes FOLDER/rank_RRRRR.h5 (one file per rank, root attributes rank,
// world_size, local_rank, host); a folder of dumps gathered by hand works the same way.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace attnscope {

bool is_directory(const std::string& path);

// The dump files under `dir`, subfolders included (to a depth of 4), sorted by path. A dump is
// a regular file named *.h5, *.hdf5, *.pt, *.pth, *.npz or *.safetensors whose name does not
// start with '.'; its format is still told from its bytes when it is opened. Fails (io) naming
// the folder when it cannot be read, or (not_found) when it holds no dump.
Result<std::vector<std::string>> list_run_dumps(const std::string& dir);

}  // namespace attnscope
