// Opening one dump or a run folder's dumps for the CLI commands.
#include "run_inputs.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "cli_options.h"
#include "core/io/run_folder.h"

namespace attnscope {

std::optional<Inputs> open_inputs(const std::string& command, const std::string& path,
                                  bool allow_external, std::optional<Shard> shard) {
  Inputs inputs;
  inputs.path = path;
  if (!is_directory(path)) {
    std::optional<DumpReader> dump = open_dump(command, path, allow_external);
    if (!dump) return std::nullopt;
    inputs.dumps.push_back({std::move(*dump), path, std::nullopt});
    return inputs;
  }
  inputs.folder = true;
  const Result<RunFolderListing> files = list_run_dumps(path, allow_external);
  if (!files) {
    fail(command, files.error().message, files.error().hint);
    return std::nullopt;
  }
  for (const SkippedRunEntry& s : files->skipped) {
    fail(command, s.error.message, s.error.hint);
    inputs.unopened.push_back(
        {std::filesystem::path(s.path).lexically_relative(path).string(), s.error});
  }
  std::vector<RunDump> dumps = order_run_dumps(files->dumps);
  if (shard && static_cast<int64_t>(dumps.size()) >= shard->count) {
    std::vector<uint64_t> sizes;
    for (const auto& d : dumps) {
      std::error_code ec;
      const uintmax_t size = std::filesystem::file_size(d.path, ec);
      sizes.push_back(ec ? 0 : size);
    }
    std::vector<RunDump> mine;
    for (size_t n : shard->part_by_weight(sizes)) mine.push_back(dumps[n]);
    dumps = std::move(mine);
    inputs.split_by_dumps = true;
  }
  // Each dump is probed in a child process: several at once, reported in order.
  std::vector<std::optional<Result<DumpReader>>> opened(dumps.size());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t n = next++; n < dumps.size(); n = next++) {
      opened[n] = try_open_dump(dumps[n].path, allow_external);
    }
  };
  std::vector<std::thread> workers;
  const size_t count =
      std::min<size_t>(dumps.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (size_t n = 1; n < count; ++n) workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  for (size_t n = 0; n < dumps.size(); ++n) {
    const std::string name = std::filesystem::path(dumps[n].path).lexically_relative(path).string();
    Result<DumpReader>& dump = *opened[n];
    if (!dump) {
      fail(command, dump.error().message, dump.error().hint);
      inputs.unopened.push_back({name, dump.error()});
      continue;
    }
    const int64_t attribute = dump->rank_identity().rank;
    inputs.dumps.push_back({std::move(*dump), name, attribute >= 0 ? attribute : dumps[n].rank});
  }
  if (inputs.dumps.empty() && !inputs.split_by_dumps) return std::nullopt;
  return inputs;
}

}  // namespace attnscope
