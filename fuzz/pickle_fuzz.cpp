// libFuzzer entry point over the restricted unpickler and the .pt case mapping (issue 16): one
// input = the bytes of a data.pkl. The harness stores it with four float32 storages of 1 KiB
// (keys "0" to "3") in a zip archive laid out like torch.save's, so that mutated pickles reach
// the tensor rebuilds, the view checks against real storages, the value-tree walk (depth and
// visit limits), case assembly and every load; zip CRCs never reject a mutation. The machine
// must never import or call anything, never allocate past its limits, and fail with messages
// that name the file.
#include <zlib.h>

#include <string>
#include <vector>

#include "fuzz/fuzz_checks.h"

#include "core/memory_budget.h"

namespace {

void put16(std::string& out, uint32_t v) {
  out += static_cast<char>(v & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& out, uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}

// A zip archive of stored members (local headers, data, central directory, end record).
std::string stored_zip(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out, central;
  for (const auto& [name, data] : members) {
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const uint32_t offset = static_cast<uint32_t>(out.size());
    std::string fields;  // flags, method, time, date, crc, sizes, name and extra lengths
    put16(fields, 0);
    put16(fields, 0);
    put16(fields, 0);
    put16(fields, 0x21);
    put32(fields, crc);
    put32(fields, static_cast<uint32_t>(data.size()));
    put32(fields, static_cast<uint32_t>(data.size()));
    put16(fields, static_cast<uint32_t>(name.size()));
    put16(fields, 0);
    out += "PK\x03\x04";
    put16(out, 20);
    out += fields + name + data;
    central += "PK\x01\x02";
    put16(central, 20);
    put16(central, 20);
    central += fields;
    put16(central, 0);
    put16(central, 0);
    put16(central, 0);
    put32(central, 0);
    put32(central, offset);
    central += name;
  }
  const uint32_t at = static_cast<uint32_t>(out.size());
  out += central + "PK\x05\x06";
  put32(out, 0);
  put16(out, static_cast<uint32_t>(members.size()));
  put16(out, static_cast<uint32_t>(members.size()));
  put32(out, static_cast<uint32_t>(central.size()));
  put32(out, at);
  put16(out, 0);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  attnscope::fuzz::require(attnscope::set_memory_budget("64M", "fuzzer").ok());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::pair<std::string, std::string>> members = {
      {"archive/data.pkl", std::string(reinterpret_cast<const char*>(data), size)},
      {"archive/byteorder", "little"}};
  std::string storage(1024, '\0');
  for (size_t i = 0; i < storage.size(); ++i) storage[i] = static_cast<char>(i * 37 % 61);
  for (const char* key : {"0", "1", "2", "3"})
    members.push_back({"archive/data/" + std::string(key), storage});
  const std::string zip = stored_zip(members);
  attnscope::fuzz::open_and_check(reinterpret_cast<const uint8_t*>(zip.data()), zip.size(),
                                  "fuzz.pt", 512);
  return 0;
}
