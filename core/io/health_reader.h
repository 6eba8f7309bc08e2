// Reading the attention health statistics of a recording (core/health_table.h): the /health
// blocks of one HDF5 dump, or of every rank file of a run folder.
#pragma once

#include <string>

#include "core/health_table.h"
#include "core/result.h"

namespace attnscope {

// The blocks in order; an empty table when the dump holds none (recorded before schema 1.2 or
// with stats=False). Errors name the file, the block, the problem and a hint.
Result<HealthTable> read_health_table(const std::string& path);

}  // namespace attnscope
