// libFuzzer entry point: one input = one HDF5 file image. Opens it with DumpReader (discovery
// and shape / type / attribute validation of every case), runs the probe's sampled test reads
// (check_data with 4 KiB reads: chunk-index walk, first / last chunk hyperslabs), then loads
// every accepted case and checks the invariants callers rely on; the case listing the probe
// would send round-trips through its encoding, and the raw input is also decoded as a listing
// payload (the parent's side of the probe channel). Any crash, sanitizer report, leak or hang
// is a bug.
#include <cstdint>
#include <cstdlib>

#include <string>
#include <string_view>

#include "core/io/dump_listing.h"
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

// Decodes what encode_listing wrote; aborts when it does not decode.
DumpListing reread(const std::string& encoded) {
  const size_t newline = encoded.find('\n');
  require(newline != std::string::npos);
  const Result<ListingHeader> header =
      parse_listing_header(std::string_view(encoded).substr(8, newline - 8));
  require(header.ok());
  Result<DumpListing> back =
      decode_listing(*header, std::string_view(encoded).substr(newline + 1), "fuzz.h5");
  require(back.ok());
  return std::move(back).value();
}

// The raw bytes as a listing payload with a matching header: the decoder must fail cleanly or
// produce a listing whose encoding decodes to the same encoding.
void decode_raw(const uint8_t* data, size_t size) {
  const std::string_view payload(reinterpret_cast<const char*>(data), size);
  const ListingHeader header{kListingVersion, size, fnv1a64(payload)};
  const Result<DumpListing> listing = decode_listing(header, payload, "raw");
  if (!listing) {
    require(listing.error().message.rfind("raw: ", 0) == 0);
    return;
  }
  const std::string encoded = encode_listing(*listing);
  require(encode_listing(reread(encoded)) == encoded);
}

// The listing of an opened dump survives its encoding.
void round_trip(const DumpReader& dump) {
  const DumpListing back = reread(encode_listing(dump.listing()));
  require(back.cases.size() == dump.cases().size() &&
          back.rejected.size() == dump.rejected().size());
  for (size_t i = 0; i < back.cases.size(); ++i) {
    require(back.cases[i].path == dump.cases()[i].path &&
            back.cases[i].tensors.size() == dump.cases()[i].tensors.size());
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decode_raw(data, size);
  OpenOptions options;
  options.max_tensor_bytes = int64_t{16} << 20;
  Result<DumpReader> dump = DumpReader::open_image(data, size, "fuzz.h5", options);
  if (!dump) {
    require(dump.error().message.rfind("fuzz.h5", 0) == 0 && !dump.error().hint.empty());
    return 0;
  }
  round_trip(*dump);
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
