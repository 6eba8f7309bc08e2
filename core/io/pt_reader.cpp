// Discovery of torch.save files (zip format, the default since torch 1.6): ARCHIVE/data.pkl is
// run by the restricted pickle machine (pickle_machine.h), ARCHIVE/data/KEY holds storage KEY,
// ARCHIVE/byteorder says "little" or "big". The value tree maps onto cases: a dict holding
// q/k/v (or aliases) is a case; a dict of such dicts gives one case per key path
// ("/layer_3"), a list of them "/0", "/1", ...; the file's top-level dict is "/case".
// Tensors may be views (storage offset and strides), honoured exactly.
#include <algorithm>
#include <map>

#include "core/io/case_assembly.h"
#include "core/io/dump_format.h"
#include "core/io/located_formats.h"
#include "core/io/pickle_machine.h"
#include "core/memory_budget.h"

namespace attnscope {

namespace {

using Kind = PickleNode::Kind;

// A data.pkl beyond this is refused before it is read (about 300 000 tensors).
constexpr int64_t kMaxPickleBytes = int64_t{64} << 20;
constexpr size_t kMaxDepth = 64;
// Values (container items) walked at most: a dump of 10 000 cases holds about 150 000; a
// crafted DAG (a list holding the same list twice, 40 times over) would hold 2^40.
constexpr size_t kMaxVisits = size_t{1} << 18;

const char* const kSaveHint =
    "save a dict of tensors: torch.save({'q': q, 'k': k, 'v': v, 'out': o, ...}, path), a list "
    "of such dicts or a dict of them per layer (keys as DESIGN §2 or their aliases query, key, "
    "value, attn_mask, out_grad, ...)";

// What torch's storage types hold.
struct StorageType {
  const char* name;
  DType dtype;
  bool readable;  // q / k / v / masks may hold it
  size_t size;
  const char* type;  // element type for messages
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::f32, true, 4, "float32"},
    {"HalfStorage", DType::f16, true, 2, "float16"},
    {"BFloat16Storage", DType::bf16, true, 2, "bfloat16"},
    {"DoubleStorage", DType::f64, true, 8, "float64"},
    {"BoolStorage", DType::boolean, true, 1, "bool"},
    {"ByteStorage", DType::u8, true, 1, "uint8"},
    {"UntypedStorage", DType::u8, true, 1, "uint8 (untyped storage)"},
    {"CharStorage", DType::u8, false, 1, "int8"},
    {"ShortStorage", DType::u8, false, 2, "int16"},
    {"IntStorage", DType::i32, true, 4, "int32"},
    {"LongStorage", DType::i64, true, 8, "int64"},
    {"ComplexFloatStorage", DType::u8, false, 8, "complex64"},
    {"ComplexDoubleStorage", DType::u8, false, 16, "complex128"},
};

const StorageType* storage_type(const std::string& name) {
  for (const StorageType& t : kStorageTypes) {
    if (name == t.name) return &t;
  }
  return nullptr;
}

// Signed integer of `size` little-endian bytes.
int64_t signed_value(const uint8_t* p, size_t size) {
  uint64_t v = 0;
  for (size_t i = size; i-- > 0;) v = v << 8 | p[i];
  if (size < 8 && (v >> (8 * size - 1)) & 1) v |= ~uint64_t{0} << (8 * size);
  return static_cast<int64_t>(v);
}

class Walker {
 public:
  Walker(const ByteStore& zip, const PickleProgram& program, std::string prefix, bool big_endian)
      : zip_(zip), program_(program), prefix_(std::move(prefix)), big_endian_(big_endian) {}

  std::optional<Error> run() {
    const PickleNode& root = program_.nodes[program_.root];
    if (root.kind == Kind::tensor) {
      const PickleTensor& t = program_.tensors[static_cast<size_t>(root.integer)];
      return make_error(ErrorCode::format,
                        zip_.name() + ": holds a single tensor of shape " + shape_text(t.size) +
                            ", not a dict of tensors q, k, v",
                        kSaveHint);
    }
    if (root.kind != Kind::dict && root.kind != Kind::list && root.kind != Kind::tuple) {
      return make_error(ErrorCode::format,
                        zip_.name() + ": holds a plain value, not a dict of tensors q, k, v",
                        kSaveHint);
    }
    walk(program_.root, 0);
    return error_;
  }

  std::vector<FoundGroup> groups;
  std::vector<std::string> top_keys;  // of the root dict, for the "no case" message

 private:
  // Walks the container `index` found at key path `segments_` (restored on return).
  void walk(uint32_t index, size_t depth) {
    if (error_) return;
    const PickleNode& node = program_.nodes[index];
    visits_ += 1 + node.items.size();
    if (visits_ > kMaxVisits || depth > kMaxDepth) {
      error_ = make_error(
          ErrorCode::too_large,
          zip_.name() + ": " + group_path(segments_) + ": " +
              (depth > kMaxDepth ? "containers nested deeper than 64 levels"
                                 : "more than " + std::to_string(kMaxVisits) +
                                       " values to walk (containers repeat themselves)"),
          "a dump nests a dict per step and layer at most; this file is crafted or not a dump");
      return;
    }
    if (node.kind == Kind::list || node.kind == Kind::tuple) {
      for (size_t i = 0; i < node.items.size(); ++i) {
        if (is_container(node.items[i])) descend(node.items[i], std::to_string(i), depth);
      }
      return;
    }
    // A dict; a key given twice keeps its last value, as Python's dict does.
    std::map<std::string, uint32_t> last;
    std::vector<std::string> order;
    for (size_t i = 0; i + 1 < node.items.size(); i += 2) {
      const PickleNode& key = program_.nodes[node.items[i]];
      std::string name;
      if (key.kind == Kind::text)
        name = key.text;
      else if (key.kind == Kind::integer)
        name = std::to_string(key.integer);
      else
        continue;
      if (last.emplace(name, node.items[i + 1]).second) {
        order.push_back(name);
      } else {
        last[name] = node.items[i + 1];
      }
    }
    if (segments_.empty()) top_keys = order;
    FoundGroup group;
    group.segments = segments_;
    for (const std::string& key : order) {
      const uint32_t value = last[key];
      const PickleNode& v = program_.nodes[value];
      const std::string field = field_alias(key);
      if (v.kind == Kind::tensor) {
        const PickleTensor& t = program_.tensors[static_cast<size_t>(v.integer)];
        if (field.empty()) {
          group.tensors.push_back(tensor(key, t));
        } else if (auto x = scalar_of(t)) {
          group.scalars.emplace_back(field, *x);
        }
      } else if (is_container(value)) {
        descend(value, key, depth);
      } else if (!field.empty()) {
        if (auto x = scalar_of(v)) group.scalars.emplace_back(field, *x);
      }
    }
    if (!group.tensors.empty() || !group.scalars.empty()) groups.push_back(std::move(group));
  }

  bool is_container(uint32_t index) const {
    const Kind k = program_.nodes[index].kind;
    return k == Kind::dict || k == Kind::list || k == Kind::tuple;
  }
  void descend(uint32_t index, const std::string& key, size_t depth) {
    segments_.push_back(key);
    walk(index, depth + 1);
    segments_.pop_back();
  }

  std::optional<FieldValue> scalar_of(const PickleNode& v) const {
    switch (v.kind) {
      case Kind::boolean:
      case Kind::integer:
        return FieldValue(static_cast<double>(v.integer));
      case Kind::real:
        return FieldValue(v.real);
      case Kind::text:
        return FieldValue(v.text);
      case Kind::global:  // a torch dtype: "torch.bfloat16"
        return FieldValue(v.text);
      default:
        return std::nullopt;
    }
  }

  // A one-element tensor's value (scale = torch.tensor(0.125)); nullopt for anything else.
  std::optional<FieldValue> scalar_of(const PickleTensor& t) const {
    FoundTensor found;
    const StorageType* type = locate(t, found);
    int64_t n = 1;
    for (int64_t d : t.size) n = saturating_product({n, d});
    if (type == nullptr || !found.problem.empty() || n != 1) return std::nullopt;
    auto bytes = zip_.read(found.where.entry, found.where.offset, static_cast<int64_t>(type->size));
    if (!bytes) return std::nullopt;
    if (big_endian_) std::reverse(bytes->begin(), bytes->end());
    if (!type->readable) {
      if (type->type[0] != 'i') return std::nullopt;  // complex
      return FieldValue(static_cast<double>(signed_value(bytes->data(), type->size)));
    }
    HostTensor one;
    one.dtype = type->dtype;
    one.shape = {1};
    one.bytes = std::move(*bytes);
    return FieldValue(one.at(0));
  }

  // The location of `t` in `out`, checked against its storage member (out.problem says what
  // is wrong); the storage's type, nullptr when it is unknown.
  const StorageType* locate(const PickleTensor& t, FoundTensor& out) const {
    const PickleStorage& s = program_.storages[t.storage];
    const StorageType* type = storage_type(s.type);
    out.shape = t.size;
    out.where.entry = prefix_ + "data/" + s.key;
    out.where.strides = t.stride;
    out.where.big_endian = big_endian_;
    out.hint = "the .pt file is damaged or crafted; re-save the tensors with torch.save";
    const size_t size = type != nullptr ? type->size : 1;
    const StoreEntry* entry = zip_.find(out.where.entry);
    int64_t storage_bytes = 0;
    std::optional<ByteSpan> span;
    if (!__builtin_mul_overflow(t.offset, static_cast<int64_t>(size), &out.where.offset)) {
      span = element_span(t.size, out.where, size);
    }
    if (type == nullptr) {
      out.problem = "storage type torch." + s.type + " is not one attnscope reads";
    } else if (entry == nullptr) {
      out.problem = "its storage '" + s.key + "' (" + out.where.entry + ") is not in the archive";
    } else if (s.numel < 0 ||
               __builtin_mul_overflow(s.numel, static_cast<int64_t>(size), &storage_bytes) ||
               entry->size < storage_bytes) {
      out.problem = "its storage declares " + std::to_string(s.numel) + " elements of " +
                    type->type + ", but " + out.where.entry + " holds " +
                    std::to_string(entry->size) + " bytes";
    } else if (!span || span->first + span->bytes > storage_bytes) {
      out.problem = "the view (offset " + std::to_string(t.offset) + ", size " +
                    shape_text(t.size) + ", stride " + shape_text(t.stride) +
                    ") reaches beyond its storage of " + std::to_string(s.numel) + " elements";
    } else {
      out.hint.clear();
    }
    return type;
  }

  FoundTensor tensor(const std::string& key, const PickleTensor& t) const {
    FoundTensor out;
    out.key = key;
    const StorageType* type = locate(t, out);
    if (!out.problem.empty()) return out;
    if (!type->readable) {
      out.problem = std::string("element type ") + type->type + " is not one attnscope reads";
    } else {
      out.dtype = type->dtype;
    }
    return out;
  }

  const ByteStore& zip_;
  const PickleProgram& program_;
  std::string prefix_;
  bool big_endian_;
  size_t visits_ = 0;
  std::vector<std::string> segments_;  // key path of the container being walked
  std::optional<Error> error_;
};

// The archive folder holding data.pkl ("archive/", or "" at the root); nullopt when none or
// several hold one.
std::optional<std::string> pickle_prefix(const ByteStore& zip) {
  std::optional<std::string> found;
  for (const StoreEntry& e : zip.entries()) {
    const std::string& n = e.name;
    if (n != "data.pkl" && (n.size() < 9 || n.compare(n.size() - 9, 9, "/data.pkl") != 0)) continue;
    const std::string prefix = n.substr(0, n.size() - 8);
    if (prefix.find('/') != prefix.rfind('/') || (found && *found != prefix)) return std::nullopt;
    found = prefix;
  }
  return found;
}

}  // namespace

bool is_pt_archive(const ByteStore& zip) {
  for (const StoreEntry& e : zip.entries()) {
    const std::string& n = e.name;
    if (n == "data.pkl" || (n.size() > 9 && n.compare(n.size() - 9, 9, "/data.pkl") == 0)) {
      return true;
    }
  }
  return false;
}

Result<DumpListing> discover_pt(const ByteStore& zip, const OpenOptions& options) {
  const std::optional<std::string> prefix = pickle_prefix(zip);
  if (!prefix) {
    return make_error(ErrorCode::format,
                      zip.name() +
                          ": more than one data.pkl in the archive (or one nested in "
                          "folders): not a file written by torch.save",
                      kSaveHint);
  }
  bool big_endian = false;
  if (const StoreEntry* order = zip.find(*prefix + "byteorder")) {
    auto text = zip.read(order->name, 0, std::min<int64_t>(order->size, 16));
    if (!text) return text.error();
    const std::string value(text->begin(), text->end());
    if (value != "little" && value != "big") {
      return store_error(zip, order->name, "says '" + value + "', not little or big",
                         "the .pt file is damaged; re-save it with torch.save");
    }
    big_endian = value == "big";
  }
  const std::string pickle_entry = *prefix + "data.pkl";
  const StoreEntry* pickle = zip.find(pickle_entry);
  if (pickle->size > kMaxPickleBytes) {
    return make_error(ErrorCode::too_large,
                      zip.name() + ": " + pickle_entry + ": " + std::to_string(pickle->size) +
                          " bytes of pickle, more than attnscope reads (" +
                          format_bytes(kMaxPickleBytes) + ")",
                      "a dump's pickle takes a few hundred bytes per tensor; split the file");
  }
  Status fits = check_memory(zip.name() + ": " + pickle_entry + ": running its pickle",
                             saturating_product({pickle->size, 16}));
  if (!fits) return fits.error();
  auto bytes = zip.read(pickle_entry, 0, pickle->size);
  if (!bytes) return bytes.error();
  Result<PickleProgram> program =
      run_pickle(bytes->data(), bytes->size(), zip.name() + ": " + pickle_entry);
  if (!program) return program.error();
  Walker walker(zip, *program, *prefix, big_endian);
  if (auto e = walker.run()) return *e;
  DumpListing listing;
  listing.format = dump_format_name(DumpFormat::pt);
  assemble_cases(walker.groups, zip.name(), options, listing);
  if (listing.cases.empty() && listing.rejected.empty()) {
    std::string keys;
    for (size_t i = 0; i < walker.top_keys.size() && i < 12; ++i) {
      keys += (i ? ", '" : "'") + walker.top_keys[i] + "'";
    }
    return make_error(ErrorCode::format,
                      zip.name() + ": no case (a dict with tensors q, k, v) found" +
                          (keys.empty() ? "" : "; its keys are " + keys),
                      kSaveHint);
  }
  return listing;
}

}  // namespace attnscope
