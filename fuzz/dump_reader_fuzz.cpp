// libFuzzer entry point: one input = one HDF5 file image. Opens it with DumpReader (discovery
// and shape / type / attribute validation of every case), runs the probe's sampled test reads
// (check_data with 4 KiB reads: chunk-index walk, first / last chunk hyperslabs), then loads
// every accepted case and checks the invariants callers rely on. Any crash, sanitizer report, leak
// or hang is a bug.
#include <cstdint>
#include <cstdlib>

#include "core/io/hdf5_dump.h"
#include "core/memory_budget.h"

namespace {

using namespace attnscope;

void require(bool condition) {
  if (!condition) std::abort();
}

// What validation promises about an accepted case.
void check_case(const CaseInfo& info) {
  const CaseDims& d = info.dims;
  require(d.batch > 0 && d.heads > 0 && d.kv_heads > 0 && d.seqlen_q > 0 && d.seqlen_k > 0 &&
          d.head_dim > 0 && d.head_dim_v > 0);
  require(d.heads % d.kv_heads == 0);
  require(info.has("q") && info.has("k") && info.has("v"));
}

void check_loaded(const CaseData& data) {
  for (const auto& [name, t] : data.tensors) {
    require(t.bytes.size() == static_cast<size_t>(t.numel()) * dtype_size(t.dtype));
  }
  require(data.q().shape ==
          std::vector<int64_t>({data.info.dims.batch, data.info.dims.heads, data.info.dims.seqlen_q,
                                data.info.dims.head_dim}));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Loads beyond 64 MiB are refused by the budget check, as for a user with a small budget.
  require(set_memory_budget("64M", "fuzzer").ok());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  OpenOptions options;
  options.max_tensor_bytes = int64_t{16} << 20;
  Result<DumpReader> dump = DumpReader::open_image(data, size, "fuzz.h5", options);
  if (!dump) {
    require(dump.error().message.rfind("fuzz.h5", 0) == 0 && !dump.error().hint.empty());
    return 0;
  }
  const Status sampled = dump->check_data(4096);
  require(sampled.ok() ||
          (sampled.error().message.rfind("fuzz.h5: /", 0) == 0 && !sampled.error().hint.empty()));
  for (const CaseInfo& info : dump->cases()) {
    check_case(info);
    Result<CaseData> loaded = dump->load(info.path);
    if (loaded) check_loaded(*loaded);
  }
  return 0;
}
