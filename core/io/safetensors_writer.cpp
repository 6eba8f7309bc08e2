// .safetensors writer (safetensors_writer.h): header JSON by nlohmann::json, data row-major
// little-endian as HostTensor holds it, written through AtomicFile.
#include "core/io/safetensors_writer.h"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/io/atomic_file.h"

namespace attnscope {
namespace {

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::u8:
      return "U8";
    case DType::boolean:
      return "BOOL";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
  }
  return "U8";
}

}  // namespace

Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const NamedTensor& t : tensors) {
    const size_t bytes = t.tensor->bytes.size();
    header[t.name] = {{"dtype", safetensors_dtype(t.tensor->dtype)},
                      {"shape", t.tensor->shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  Result<AtomicFile> file = AtomicFile::create(path);
  if (!file) return file.error();
  {
    std::ofstream out(file->temp_path(), std::ios::binary | std::ios::trunc);
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
    out.write(reinterpret_cast<const char*>(length), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const NamedTensor& t : tensors) {
      out.write(reinterpret_cast<const char*>(t.tensor->bytes.data()),
                static_cast<std::streamsize>(t.tensor->bytes.size()));
    }
    if (!out.flush()) {
      return make_error(ErrorCode::io, path + ": cannot write the tensors",
                        "check the free space and permissions of its folder");
    }
  }
  return file->commit();
}

}  // namespace attnscope
