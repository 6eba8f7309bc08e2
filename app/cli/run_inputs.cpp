// Opening one dump or a run folder's dumps for the CLI commands.
#include "run_inputs.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <regex>
#include <thread>

#include "cli_options.h"
#include "core/io/run_folder.h"

namespace attnscope {
namespace {

// 3 for ".../rank_00003.h5", "rank3.pt", "rank-3.npz"; nullopt without such a name.
std::optional<int64_t> rank_in_name(const std::string& path) {
  static const std::regex pattern("rank[_-]?([0-9]{1,7})");
  std::smatch m;
  const std::string name = std::filesystem::path(path).filename().string();
  if (!std::regex_search(name, m, pattern)) return std::nullopt;
  return std::stoll(m[1].str());
}

// The folder's dumps in scan order with the rank each takes when it has no rank attribute.
std::vector<std::pair<std::string, int64_t>> ordered_dumps(const std::vector<std::string>& files) {
  std::vector<std::pair<std::string, std::optional<int64_t>>> named;
  for (const std::string& f : files) named.emplace_back(f, rank_in_name(f));
  std::stable_sort(named.begin(), named.end(), [](const auto& a, const auto& b) {
    return a.second && (!b.second || *a.second < *b.second);
  });
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t n = 0; n < named.size(); ++n) {
    out.emplace_back(named[n].first, named[n].second.value_or(static_cast<int64_t>(n)));
  }
  return out;
}

}  // namespace

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
  const Result<std::vector<std::string>> files = list_run_dumps(path);
  if (!files) {
    fail(command, files.error().message, files.error().hint);
    return std::nullopt;
  }
  std::vector<std::pair<std::string, int64_t>> dumps = ordered_dumps(*files);
  if (shard && static_cast<int64_t>(dumps.size()) >= shard->count) {
    std::vector<uint64_t> sizes;
    for (const auto& d : dumps) {
      std::error_code ec;
      const uintmax_t size = std::filesystem::file_size(d.first, ec);
      sizes.push_back(ec ? 0 : size);
    }
    std::vector<std::pair<std::string, int64_t>> mine;
    for (size_t n : shard->part_by_weight(sizes)) mine.push_back(dumps[n]);
    dumps = std::move(mine);
    inputs.split_by_dumps = true;
  }
  // Each dump is probed in a child process: several at once, reported in order.
  std::vector<std::optional<Result<DumpReader>>> opened(dumps.size());
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t n = next++; n < dumps.size(); n = next++) {
      opened[n] = try_open_dump(dumps[n].first, allow_external);
    }
  };
  std::vector<std::thread> workers;
  const size_t count =
      std::min<size_t>(dumps.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (size_t n = 1; n < count; ++n) workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  for (size_t n = 0; n < dumps.size(); ++n) {
    const std::string name =
        std::filesystem::path(dumps[n].first).lexically_relative(path).string();
    Result<DumpReader>& dump = *opened[n];
    if (!dump) {
      fail(command, dump.error().message, dump.error().hint);
      inputs.unopened.push_back({name, dump.error()});
      continue;
    }
    const int64_t attribute = dump->rank_identity().rank;
    inputs.dumps.push_back({std::move(*dump), name, attribute >= 0 ? attribute : dumps[n].second});
  }
  if (inputs.dumps.empty() && !inputs.split_by_dumps) return std::nullopt;
  return inputs;
}

}  // namespace attnscope
