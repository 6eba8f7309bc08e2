// attnscope-make-samples [--packed] OUT.h5: writes the bundled sample dump (seed_cases.h5), or
// with --packed the packed-sequence sample (packed_sequences.h5), deterministically
// (regenerating gives the same bytes with the same HDF5 version).
#include <iostream>
#include <string>

#include "core/io/hdf5_dump.h"
#include "sample_cases.h"

int main(int argc, char** argv) {
  using namespace attnscope;
  // One path; anything else that looks like an option (--help) is not a file name to create.
  const bool packed = argc == 3 && std::string(argv[1]) == "--packed";
  const char* out = argv[argc - 1];
  if (argc != 2 + packed || out[0] == '-') {
    std::cerr << "usage: attnscope-make-samples [--packed] OUT.h5\n";
    return 2;
  }
  Result<DumpWriter> writer = DumpWriter::create(out);
  if (!writer) {
    std::cerr << "attnscope-make-samples: " << writer.error().describe() << "\n";
    return 2;
  }
  std::vector<SampleCase> cases;
  if (packed) {
    cases = make_packed_sequences();
  } else {
    cases = {make_fp16_score_overflow(), make_padding_mask_fp16(), make_exploding_grad(),
             make_healthy(), make_recorded_mismatch()};
    for (SampleCase& c : make_training_series()) cases.push_back(std::move(c));
  }
  for (const SampleCase& c : cases) {
    const Status written = writer->write_case(c.group_path, c.data);
    if (!written) {
      std::cerr << "attnscope-make-samples: " << written.error().describe() << "\n";
      return 2;
    }
  }
  const Status closed = writer->close();
  if (!closed) {
    std::cerr << "attnscope-make-samples: " << closed.error().describe() << "\n";
    return 2;
  }
  std::cout << "wrote " << cases.size() << " cases to " << out << "\n";
  return 0;
}
