// attnscope-probe FILE [--allow-external]: opens an untrusted dump (metadata, discovery and
// validation of every case) and exits 0 when it can be read, 2 when attnscope refuses it (the
// reason on stderr). Run by probe_dump() in a child process, so that a crash or hang inside
// the HDF5 library never takes the CLI or the GUI down with it.
#include <iostream>
#include <string>

#include "core/io/hdf5_dump.h"

int main(int argc, char** argv) {
  using namespace attnscope;
  if (argc < 2 || argc > 3 || (argc == 3 && std::string(argv[2]) != "--allow-external")) {
    std::cerr << "usage: attnscope-probe FILE [--allow-external]\n";
    return 2;
  }
  OpenOptions options;
  options.allow_external = argc == 3;
  const Result<DumpReader> dump = DumpReader::open(argv[1], options);
  if (!dump) {
    std::cerr << dump.error().describe() << "\n";
    return 2;
  }
  std::cout << argv[1] << ": " << dump->cases().size() << " cases\n";
  return 0;
}
