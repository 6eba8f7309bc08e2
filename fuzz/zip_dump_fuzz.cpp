// libFuzzer entry point over the zip formats (issue 16): one input = one file image that
// starts like a zip archive (torch.save's .pt, numpy's .npz). Runs libzip's archive parsing,
// the .pt layout checks (data.pkl, byteorder, storages) and the restricted pickle machine, or
// the .npy header parser, case assembly, the probe's sampled reads and every load (inflating
// deflated members). Inputs that do not start with "PK" are skipped (dump_reader_fuzz covers
// HDF5, safetensors_fuzz the rest).
#include "fuzz/fuzz_checks.h"

#include "core/memory_budget.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  attnscope::fuzz::require(attnscope::set_memory_budget("64M", "fuzzer").ok());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4 || data[0] != 'P' || data[1] != 'K') return 0;
  attnscope::fuzz::open_and_check(data, size, "fuzz.pt", 4096);
  return 0;
}
