// libFuzzer entry point over the run-folder walker (issue 42): one input = a recipe that builds
// a folder tree in a scratch directory (subfolders, dump-named regular files, FIFOs, symbolic
// links to files and folders inside and outside it, dangling links and link loops), which
// list_run_dumps() then lists with and without following links that leave it. Invariants:
// nothing is opened (a FIFO never blocks), every listed dump is a regular file, without
// --allow-external none resolves outside the folder, each skipped entry says why, and
// order_run_dumps keeps every dump.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/io/run_folder.h"
#include "fuzz/fuzz_checks.h"

namespace fs = std::filesystem;

namespace {

fs::path scratch;

// Bytes read one at a time; 0 past the end.
struct Recipe {
  const uint8_t* data;
  size_t size, at = 0;
  uint8_t next() { return at < size ? data[at++] : 0; }
  bool done() const { return at >= size; }
};

// A relative path of 1-3 components from a small alphabet, ending in a dump suffix or not.
std::string entry_name(Recipe& r) {
  static const char* const kSuffixes[] = {".h5", ".pt", ".npz", ".safetensors", ".txt", ""};
  static const char kLetters[] = "ab0123_.";
  std::string name;
  const int parts = 1 + r.next() % 3;
  for (int p = 0; p < parts; ++p) {
    if (p) name += '/';
    const int length = 1 + r.next() % 6;
    for (int i = 0; i < length; ++i) name += kLetters[r.next() % (sizeof kLetters - 1)];
  }
  return name + kSuffixes[r.next() % 6];
}

void build(Recipe& r, const fs::path& root) {
  std::error_code ec;
  for (int n = 0; n < 48 && !r.done(); ++n) {
    const uint8_t op = r.next() % 6;
    const fs::path at = root / entry_name(r);
    fs::create_directories(at.parent_path(), ec);
    switch (op) {
      case 0:
        fs::create_directories(at, ec);
        break;
      case 1:
        std::ofstream(at) << "not a dump";
        break;
      case 2:
        ::mkfifo(at.c_str(), 0600);
        break;
      default: {  // a link: inside, outside, upwards, to itself, or dangling
        static const char* const kTargets[] = {"/etc/hostname", "..", "../..", "/", "."};
        const uint8_t pick = r.next() % 7;
        const fs::path target = pick < 5    ? fs::path(kTargets[pick])
                                : pick == 5 ? at.filename()
                                            : fs::path(entry_name(r));
        fs::create_symlink(target, at, ec);
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char pattern[] = "/tmp/attnscope-run-fuzz-XXXXXX";
  attnscope::fuzz::require(::mkdtemp(pattern) != nullptr);
  scratch = pattern;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using attnscope::fuzz::require;
  const fs::path root = scratch / "run";
  std::error_code ec;
  fs::remove_all(root, ec);
  fs::create_directories(root);
  Recipe recipe{data, size};
  build(recipe, root);
  const fs::path canonical_root = fs::weakly_canonical(root);
  for (bool follow : {false, true}) {
    const auto listing = attnscope::list_run_dumps(root.string(), follow);
    if (!listing) continue;  // an empty folder, or one that cannot be read
    for (const std::string& dump : listing->dumps) {
      struct stat st {};
      require(::stat(dump.c_str(), &st) == 0 && S_ISREG(st.st_mode));
      if (!follow) {
        const fs::path inside = fs::weakly_canonical(dump).lexically_relative(canonical_root);
        require(!inside.empty() && *inside.begin() != "..");
      }
    }
    for (const attnscope::SkippedRunEntry& s : listing->skipped) {
      require(!s.error.message.empty() && !s.error.hint.empty());
    }
    require(attnscope::order_run_dumps(listing->dumps).size() == listing->dumps.size());
  }
  return 0;
}
