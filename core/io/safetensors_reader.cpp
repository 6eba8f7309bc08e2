// Discovery of .safetensors files: an 8-byte little-endian header length N, N bytes of JSON
// ({"NAME": {"dtype": "F16", "shape": [...], "data_offsets": [BEGIN, END]}, ...,
// "__metadata__": {"KEY": "TEXT"}}) parsed with nlohmann::json, then the data buffer; offsets are
// relative to it. The header is validated whole before any tensor is listed: offsets inside
// the buffer, END - BEGIN = the shape's bytes, no two tensors overlapping. Names map onto
// cases like .npz members ("q" -> /case, "layer_3.q" or "layer_3/q" -> /layer_3); metadata
// values are text scalars ("scale": "0.125", "is_causal": "true").
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "core/io/case_assembly.h"
#include "core/io/dump_format.h"
#include "core/io/located_formats.h"
#include "core/memory_budget.h"

namespace attnscope {

namespace {

using json = nlohmann::json;

// The format's own limit on the header.
constexpr int64_t kMaxHeaderBytes = int64_t{100} << 20;
constexpr int kMaxDepth = 8;

const char* const kHeaderHint =
    "the .safetensors header is corrupt or crafted; re-save the tensors with "
    "safetensors.torch.save_file";

struct Dtype {
  const char* name;
  size_t size;
  bool readable;
  DType dtype;
};
constexpr Dtype kDtypes[] = {{"F16", 2, true, DType::f16},      {"BF16", 2, true, DType::bf16},
                             {"F32", 4, true, DType::f32},      {"F64", 8, true, DType::f64},
                             {"BOOL", 1, true, DType::boolean}, {"U8", 1, true, DType::u8},
                             {"I8", 1, false, DType::u8},       {"I16", 2, false, DType::u8},
                             {"U16", 2, false, DType::u8},      {"I32", 4, true, DType::i32},
                             {"U32", 4, false, DType::u8},      {"I64", 8, true, DType::i64},
                             {"U64", 8, false, DType::u8},      {"F8_E4M3", 1, false, DType::u8},
                             {"F8_E5M2", 1, false, DType::u8}};

const Dtype* find_dtype(const std::string& name) {
  for (const Dtype& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

// Deepest nesting of [ and { outside strings (refused before parsing when beyond kMaxDepth).
int nesting(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

std::vector<std::string> split_name(const std::string& name) {
  std::vector<std::string> out(1);
  for (char c : name) {
    if (c == '/' || c == '.')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

// A non-negative integer of the header below 2^62; nullopt otherwise.
std::optional<int64_t> size_value(const json& v) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > (uint64_t{1} << 62)) return std::nullopt;
  return static_cast<int64_t>(v.get<uint64_t>());
}

// One tensor entry of the header.
struct Entry {
  std::string name;
  const Dtype* dtype = nullptr;
  std::string dtype_name;
  std::vector<int64_t> shape;
  int64_t begin = 0, end = 0;
};

}  // namespace

namespace {

Result<DumpListing> discover(const ByteStore& file, const OpenOptions& options) {
  const int64_t file_size = file.entries().front().size;
  auto bad = [&](const std::string& problem) {
    return make_error(ErrorCode::format, file.name() + ": " + problem, kHeaderHint);
  };
  auto head = file.read("", 0, std::min<int64_t>(file_size, 8));
  if (!head) return head.error();
  if (head->size() < 8) return bad("too short for a .safetensors header");
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = length << 8 | (*head)[static_cast<size_t>(i)];
  if (length > static_cast<uint64_t>(file_size - 8) ||
      length > static_cast<uint64_t>(kMaxHeaderBytes)) {
    return bad("the header length " + std::to_string(length) + " is larger than the file (" +
               std::to_string(file_size) + " bytes) or the format's 100 MB limit");
  }
  Status fits =
      check_memory(file.name() + ": reading its header", static_cast<int64_t>(length) * 8);
  if (!fits) return fits.error();
  auto bytes = file.read("", 8, static_cast<int64_t>(length));
  if (!bytes) return bytes.error();
  const std::string text(bytes->begin(), bytes->end());
  if (nesting(text) > kMaxDepth) return bad("the header nests deeper than a safetensors header");
  const json header = json::parse(text, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return bad("the header is not a JSON object");
  const int64_t data_size = file_size - 8 - static_cast<int64_t>(length);
  std::vector<Entry> entries;
  std::map<std::vector<std::string>, FoundGroup> groups;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [key, text_value] : value.items()) {
        if (!text_value.is_string()) return bad("__metadata__ value '" + key + "' is not a string");
        std::vector<std::string> segments = split_name(key);
        const std::string field = field_alias(segments.back());
        segments.pop_back();
        groups[segments].segments = segments;
        if (!field.empty())
          groups[segments].scalars.emplace_back(field, text_value.get<std::string>());
      }
      continue;
    }
    Entry e;
    e.name = name;
    const json* dtype = value.is_object() && value.contains("dtype") ? &value["dtype"] : nullptr;
    const json* shape = value.is_object() && value.contains("shape") ? &value["shape"] : nullptr;
    const json* offsets =
        value.is_object() && value.contains("data_offsets") ? &value["data_offsets"] : nullptr;
    if (!dtype || !dtype->is_string() || !shape || !shape->is_array() || !offsets ||
        !offsets->is_array() || offsets->size() != 2) {
      return bad("tensor '" + name + "' lacks dtype, shape or data_offsets [begin, end]");
    }
    e.dtype_name = dtype->get<std::string>();
    e.dtype = find_dtype(e.dtype_name);
    int64_t bytes_needed = e.dtype ? static_cast<int64_t>(e.dtype->size) : 1;
    for (const json& d : *shape) {
      const std::optional<int64_t> dim = size_value(d);
      if (!dim || e.shape.size() >= 32) return bad("tensor '" + name + "' has an invalid shape");
      e.shape.push_back(*dim);
      bytes_needed = saturating_product({bytes_needed, *dim});
    }
    const std::optional<int64_t> begin = size_value((*offsets)[0]), end = size_value((*offsets)[1]);
    if (!begin || !end || *begin > *end || *end > data_size) {
      return bad("tensor '" + name + "': data_offsets " +
                 (begin && end ? "[" + std::to_string(*begin) + ", " + std::to_string(*end) + "]"
                               : std::string("that are not sizes")) +
                 " lie outside the data buffer of " + std::to_string(data_size) + " bytes");
    }
    e.begin = *begin;
    e.end = *end;
    if (e.dtype && e.end - e.begin != bytes_needed) {
      return bad("tensor '" + name + "': data_offsets [" + std::to_string(e.begin) + ", " +
                 std::to_string(e.end) + "] hold " + std::to_string(e.end - e.begin) +
                 " bytes, its shape and dtype " + e.dtype_name + " need " +
                 std::to_string(bytes_needed));
    }
    entries.push_back(std::move(e));
  }
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries) {
    if (e.end > e.begin) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  const Entry* reach = nullptr;  // the tensor ending last among those before
  for (const Entry* e : by_offset) {
    if (reach != nullptr && e->begin < reach->end) {
      return bad("tensors '" + reach->name + "' and '" + e->name + "' overlap in the data buffer");
    }
    if (reach == nullptr || e->end > reach->end) reach = e;
  }
  for (const Entry& e : entries) {
    std::vector<std::string> segments = split_name(e.name);
    FoundTensor t;
    t.key = segments.back();
    segments.pop_back();
    t.shape = e.shape;
    t.where.offset = 8 + static_cast<int64_t>(length) + e.begin;
    t.where.strides = contiguous_strides(e.shape);
    if (!e.dtype || !e.dtype->readable) {
      t.problem = "element type " + e.dtype_name + " is not one attnscope reads";
    } else {
      t.dtype = e.dtype->dtype;
    }
    FoundGroup& group = groups[segments];
    group.segments = segments;
    const std::string field = field_alias(t.key);
    if (field.empty()) {
      group.tensors.push_back(std::move(t));
    } else if (t.problem.empty() && e.end - e.begin == static_cast<int64_t>(e.dtype->size)) {
      auto one = file.read("", t.where.offset, e.end - e.begin);
      if (!one) return one.error();
      group.scalars.emplace_back(
          field, gather_tensor(t.dtype, {1}, {"", 0, {1}, false}, one->data()).at(0));
    }
  }
  std::vector<FoundGroup> found;
  for (auto& [segments, group] : groups) found.push_back(std::move(group));
  DumpListing listing;
  listing.format = dump_format_name(DumpFormat::safetensors);
  assemble_cases(found, file.name(), options, listing);
  if (listing.cases.empty() && listing.rejected.empty()) {
    return make_error(ErrorCode::format,
                      file.name() + ": no case (tensors q, k, v) in the .safetensors file",
                      "save the tensors with safetensors.torch.save_file({'q': q, 'k': k, "
                      "'v': v, ...}, path)");
  }
  return listing;
}

}  // namespace

Result<DumpListing> discover_safetensors(const ByteStore& file, const OpenOptions& options) {
  try {
    return discover(file, options);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::format,
                      file.name() + ": the header is malformed (" + e.what() + ")", kHeaderHint);
  }
}

}  // namespace attnscope
