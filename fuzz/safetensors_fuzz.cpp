// libFuzzer entry point over .safetensors (issue 16): one input = one file image; the first 8
// bytes are forced to the little-endian length of a header that ends where the input's last
// '}' of its first 64 KiB is, so mutations exercise the JSON header (nlohmann::json), its
// validation (dtypes, shapes, offsets in range, sizes, overlaps), case assembly, the sampled
// reads and every load rather than the length check alone.
#include <algorithm>
#include <vector>

#include "fuzz/fuzz_checks.h"

#include "core/memory_budget.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  attnscope::fuzz::require(attnscope::set_memory_budget("64M", "fuzzer").ok());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 10 || data[8] != '{') return 0;
  std::vector<uint8_t> image(data, data + size);
  const size_t window = std::min<size_t>(size, 8 + 65536);
  size_t end = 0;
  for (size_t i = 8; i < window; ++i) {
    if (image[i] == '}') end = i + 1;
  }
  if (end > 8 && (data[0] & 1) == 0) {  // odd first bytes keep the input's own length
    const uint64_t length = end - 8;
    for (int i = 0; i < 8; ++i)
      image[static_cast<size_t>(i)] = static_cast<uint8_t>(length >> (8 * i));
  }
  attnscope::fuzz::open_and_check(image.data(), image.size(), "fuzz.safetensors", 4096);
  return 0;
}
