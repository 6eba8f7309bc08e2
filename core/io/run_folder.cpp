// Listing a run folder's dumps with std::filesystem (stat only: no file is opened here) and
// ordering them by rank.
#include "core/io/run_folder.h"

#include "core/io/input_path.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <regex>
#include <system_error>

namespace attnscope {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxDepth = 4;

bool is_dump_name(const std::string& name) {
  static const std::array<const char*, 6> kExtensions = {".h5",  ".hdf5", ".pt",
                                                         ".pth", ".npz",  ".safetensors"};
  if (name.empty() || name[0] == '.') return false;
  const std::string ext = fs::path(name).extension().string();
  return std::any_of(kExtensions.begin(), kExtensions.end(),
                     [&](const char* e) { return ext == e; });
}

}  // namespace

bool is_directory(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

Result<RunFolderListing> list_run_dumps(const std::string& dir, bool follow_outside_links) {
  RunFolderListing out;
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(dir, ec);
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code entry_ec;
    if (it->is_directory(entry_ec) && !it->is_symlink(entry_ec)) {
      if (it.depth() + 1 >= kMaxDepth || name.empty() || name[0] == '.') {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (!is_dump_name(name)) continue;
    const std::string path = it->path().string();
    if (it->is_symlink(entry_ec) && !follow_outside_links) {
      const fs::path target = fs::weakly_canonical(it->path(), entry_ec);
      const fs::path inside = target.lexically_relative(root);
      if (entry_ec || inside.empty() || *inside.begin() == "..") {
        out.skipped.push_back(
            {path, make_error(ErrorCode::unsupported,
                              path + ": a symbolic link to " + target.string() +
                                  ", outside the run folder; not followed",
                              "the data lives outside the run folder; pass --allow-external "
                              "if you trust the link")});
        continue;
      }
    }
    if (Status file = check_dump_file(path); !file) {
      out.skipped.push_back({path, file.error()});
      continue;
    }
    out.dumps.push_back(path);
  }
  if (ec) {
    return make_error(ErrorCode::io, dir + ": cannot read the folder: " + ec.message(),
                      "check that it exists and that you may read it");
  }
  if (out.dumps.empty() && out.skipped.empty()) {
    return make_error(ErrorCode::not_found, dir + ": no dump in this folder",
                      "a run folder holds the dumps of one run (rank_00000.h5, ...; also .pt, "
                      ".npz, .safetensors), in it or in its subfolders");
  }
  std::sort(out.dumps.begin(), out.dumps.end());
  std::sort(out.skipped.begin(), out.skipped.end(),
            [](const SkippedRunEntry& a, const SkippedRunEntry& b) { return a.path < b.path; });
  return out;
}

std::optional<int64_t> rank_in_name(const std::string& path) {
  static const std::regex pattern("rank[_-]?([0-9]{1,7})");
  std::smatch m;
  const std::string name = fs::path(path).filename().string();
  if (!std::regex_search(name, m, pattern)) return std::nullopt;
  return std::stoll(m[1].str());
}

std::vector<RunDump> order_run_dumps(const std::vector<std::string>& files) {
  std::vector<std::pair<std::string, std::optional<int64_t>>> named;
  for (const std::string& f : files) named.emplace_back(f, rank_in_name(f));
  std::stable_sort(named.begin(), named.end(), [](const auto& a, const auto& b) {
    return a.second && (!b.second || *a.second < *b.second);
  });
  std::vector<RunDump> out;
  for (size_t n = 0; n < named.size(); ++n) {
    out.push_back({named[n].first, named[n].second.value_or(static_cast<int64_t>(n))});
  }
  return out;
}

}  // namespace attnscope
