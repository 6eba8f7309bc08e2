// Opening one dump or a run folder's dumps for the CLI commands.
#include "run_inputs.h"

#include <algorithm>
#include <filesystem>
#include <regex>

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

}  // namespace

std::optional<Inputs> open_inputs(const std::string& command, const std::string& path,
                                  bool allow_external) {
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
  for (size_t n = 0; n < files->size(); ++n) {
    const std::string& file = (*files)[n];
    const std::string name = std::filesystem::path(file).lexically_relative(path).string();
    Result<DumpReader> dump = try_open_dump(file, allow_external);
    if (!dump) {
      fail(command, dump.error().message, dump.error().hint);
      inputs.unopened.push_back({name, dump.error()});
      continue;
    }
    std::optional<int64_t> rank;
    if (dump->rank_identity().rank >= 0) rank = dump->rank_identity().rank;
    if (!rank) rank = rank_in_name(file);
    if (!rank) rank = static_cast<int64_t>(n);
    inputs.dumps.push_back({std::move(*dump), name, rank});
  }
  if (inputs.dumps.empty()) return std::nullopt;
  std::stable_sort(inputs.dumps.begin(), inputs.dumps.end(),
                   [](const InputDump& a, const InputDump& b) { return *a.rank < *b.rank; });
  return inputs;
}

}  // namespace attnscope
