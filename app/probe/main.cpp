// attnscope-probe FILE [--allow-external] [--sample-bytes N]: opens an untrusted dump
// (metadata, discovery and validation of every case), then test-reads the data of every tensor
// (DumpReader::check_data). Run by probe_dump() in a child process, so that a crash or hang
// inside the HDF5 library never takes the CLI or the GUI down with it. Exit status and stdout
// lines are the protocol of core/io/dump_probe.h.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/io/dump_probe.h"
#include "core/io/hdf5_dump.h"

namespace {

// One protocol line: "KEY TEXT" with newlines in TEXT flattened, flushed at once so that the
// parent sees it even when the next library call crashes.
void say(const char* key, std::string text) {
  for (char& c : text) c = c == '\n' ? ' ' : c;
  std::printf("%s %s\n", key, text.c_str());
  std::fflush(stdout);
}

int usage() {
  std::cerr << "usage: attnscope-probe FILE [--allow-external] [--sample-bytes N]\n";
  return attnscope::kProbeRefused;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace attnscope;
  if (argc < 2) return usage();
  OpenOptions options;
  int64_t sample_bytes = kProbeSampleBytes;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--allow-external") {
      options.allow_external = true;
    } else if (arg == "--sample-bytes" && i + 1 < argc) {
      char* end = nullptr;
      sample_bytes = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || sample_bytes <= 0) return usage();
    } else {
      return usage();
    }
  }
  const Result<DumpReader> dump = DumpReader::open(argv[1], options);
  if (!dump) {
    std::cerr << dump.error().describe() << "\n";
    return kProbeRefused;
  }
  const Status data = dump->check_data(
      sample_bytes, [](const std::string& dataset) { say(kProbeReadingLine, dataset); });
  if (!data) {
    say(kProbeErrorLine, data.error().message);
    say(kProbeHintLine, data.error().hint);
    return kProbeDataUnreadable;
  }
  say(kProbeCasesLine, std::to_string(dump->cases().size()));
  return kProbeReadable;
}
