// The dumps a command reads: one FILE, or every dump of a run folder (core/io/run_folder.h).
// A folder's dumps are taken in order_run_dumps() order (the rank in their names, "rank_N",
// "rankN", "rank-N" as the recorder writes them, then the others by path); each dump's rank is
// its rank attribute, else the one in its name, else its position in that order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/io/hdf5_dump.h"
#include "shard.h"

namespace attnscope {

struct InputDump {
  DumpReader reader;
  std::string name;  // the path relative to the run folder; the path as given for one FILE
  std::optional<int64_t> rank;  // set for every dump of a run folder
};

struct Inputs {
  std::string path;     // as given
  bool folder = false;  // a run folder (then every dump has a rank)
  // Only the dumps of one shard were opened (a folder of at least N dumps, shard.h).
  bool split_by_dumps = false;
  std::vector<InputDump> dumps;  // in the order above
  struct Unopened {
    std::string name;  // relative to the folder
    Error error;
  };
  std::vector<Unopened> unopened;  // a folder's dumps that could not be opened (printed)
};

// Opens PATH: one dump, or the dumps of a run folder (with a shard: only its part of them
// when the folder holds at least N dumps). Prints each failure; nullopt when nothing could be
// opened.
std::optional<Inputs> open_inputs(const std::string& command, const std::string& path,
                                  bool allow_external, std::optional<Shard> shard = std::nullopt);

}  // namespace attnscope
