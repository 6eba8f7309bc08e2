// attnscope-probe FILE [--allow-external] [--sample-bytes N] [--skip /case]...: opens an
// untrusted dump (metadata, discovery and validation of every case), test-reads the data of
// every case (DumpReader::check_case; a case that fails is listed as broken) and writes the
// listing for the parent. Run by probe_dump() in a child process, so that a crash or hang
// inside the HDF5 library or a reader (.pt / .npz / .safetensors) never takes the CLI or the
// GUI down with it. Exit status and stdout
// lines are the protocol of core/io/dump_probe.h.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "core/io/dump_probe.h"
#include "core/io/hdf5_dump.h"
#include "core/io/health_reader.h"

namespace {

// One protocol line: "KEY TEXT" with newlines in TEXT flattened, flushed at once so that the
// parent sees it even when the next library call crashes.
void say(const char* key, std::string text) {
  for (char& c : text) c = c == '\n' ? ' ' : c;
  std::printf("%s %s\n", key, text.c_str());
  std::fflush(stdout);
}

// Broken cases in case order (skipped ones were moved out first).
void sort_broken(std::vector<attnscope::BrokenCase>& broken) {
  std::stable_sort(broken.begin(), broken.end(), [](const auto& a, const auto& b) {
    return attnscope::case_order_less(a.info, b.info);
  });
}

int usage() {
  std::cerr << "usage: attnscope-probe FILE [--allow-external] [--sample-bytes N] "
               "[--skip /case]...\n";
  return attnscope::kProbeRefused;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace attnscope;
  if (argc < 2) return usage();
  OpenOptions options;
  int64_t sample_bytes = kProbeSampleBytes;
  std::set<std::string> skip;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--allow-external") {
      options.allow_external = true;
    } else if (arg == "--sample-bytes" && i + 1 < argc) {
      char* end = nullptr;
      sample_bytes = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || sample_bytes <= 0) return usage();
    } else if (arg == "--skip" && i + 1 < argc) {
      skip.insert(argv[++i]);
    } else {
      return usage();
    }
  }
  Result<DumpReader> dump = DumpReader::open(argv[1], options);
  if (!dump) {
    std::cerr << dump.error().describe() << "\n";
    return kProbeRefused;
  }
  // Cases whose data a previous run could not read (crash, hang) are listed broken unread;
  // the parent fills in their error.
  DumpListing listing = dump->take_listing();
  size_t readable = 0;  // listing.cases[0, readable) are readable, kept in place (no copy)
  // The sequences of a packed group read the same datasets: the group is checked once.
  std::map<std::string, Status> checked_groups;  // stored path -> result
  const auto keep_open = dump->keep_open();      // one open of the file for every case
  for (CaseInfo& info : listing.cases) {
    if (skip.count(info.stored_path())) {
      listing.broken.push_back({std::move(info), Error{}});
      continue;
    }
    // "checking /case" goes out just before the case's first test read: a case that needs
    // none (an HDF5 case of contiguous datasets) costs no protocol line.
    const auto check = [&] {
      bool announced = false;
      return dump->check_case(info, sample_bytes, [&](const std::string& dataset) {
        if (!std::exchange(announced, true)) say(kProbeCheckingLine, info.stored_path());
        say(kProbeReadingLine, dataset);
      });
    };
    auto known = checked_groups.find(info.stored_path());
    const Status data = !info.packed ? check()
                        : known != checked_groups.end()
                            ? known->second
                            : checked_groups.emplace(info.stored_path(), check()).first->second;
    if (data) {
      if (&listing.cases[readable] != &info) listing.cases[readable] = std::move(info);
      ++readable;
      continue;
    }
    Error e = data.error();
    e.message += " (found by attnscope's probe)";
    listing.broken.push_back({std::move(info), std::move(e)});
  }
  // The recorder's health statistics are read whole as a test (attribute strings from the
  // global heap included, where libhdf5 has faulted on a corrupt file); `--skip /health` after
  // a run that died there: listed unreadable.
  if (listing.health_blocks > 0 && skip.count(kProbeHealthObject)) {
    listing.health_blocks = kHealthUnreadable;
  } else if (listing.health_blocks > 0) {
    say(kProbeCheckingLine, kProbeHealthObject);
    read_health_table(argv[1]);  // its errors are the parent's to report when it reads
  }
  say(kProbeCheckingLine, "");
  listing.cases.resize(readable);
  sort_broken(listing.broken);
  const std::string encoded = encode_listing(listing);
  std::fwrite(encoded.data(), 1, encoded.size(), stdout);
  std::fflush(stdout);
  return kProbeReadable;
}
