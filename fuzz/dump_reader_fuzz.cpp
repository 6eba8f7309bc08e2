// libFuzzer entry point: one input = one HDF5 file image. Opens it with DumpReader (discovery
// and shape / type / attribute validation of every case), runs the probe's sampled test reads
// (check_data with 4 KiB reads: chunk-index walk, first / last chunk hyperslabs), then loads
// every accepted case and checks the invariants callers rely on; the case listing the probe
// would send round-trips through its encoding, and the raw input is also decoded as a listing
// payload (the parent's side of the probe channel). Any crash, sanitizer report, leak or hang
// is a bug.
#include <cstdint>
#include <string>
#include <string_view>

#include "core/memory_budget.h"
#include "fuzz/fuzz_checks.h"

namespace {

using namespace attnscope;
using fuzz::require;

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
  require(encode_listing(fuzz::reread(encoded, "raw")) == encoded);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Loads beyond 64 MiB are refused by the budget check, as for a user with a small budget.
  require(set_memory_budget("64M", "fuzzer").ok());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decode_raw(data, size);
  fuzz::open_and_check(data, size, "fuzz.h5", 4096);
  return 0;
}
