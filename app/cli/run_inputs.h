// The dumps a command reads: one FILE, or every dump of a run folder (core/io/run_folder.h),
// ordered by rank. A dump of a folder whose rank is unknown (no rank attribute) takes the
// number in a "rank_N" / "rankN" / "rank-N" name, else its position in path order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/io/hdf5_dump.h"

namespace attnscope {

struct InputDump {
  DumpReader reader;
  std::string name;  // the path relative to the run folder; the path as given for one FILE
  std::optional<int64_t> rank;  // set for every dump of a run folder
};

struct Inputs {
  std::string path;              // as given
  bool folder = false;           // a run folder (then every dump has a rank)
  std::vector<InputDump> dumps;  // by (rank, path)
  struct Unopened {
    std::string name;  // relative to the folder
    Error error;
  };
  std::vector<Unopened> unopened;  // a folder's dumps that could not be opened (printed)
};

// Opens PATH: one dump, or each dump of a run folder. Prints each failure; nullopt when
// nothing could be opened.
std::optional<Inputs> open_inputs(const std::string& command, const std::string& path,
                                  bool allow_external);

}  // namespace attnscope
