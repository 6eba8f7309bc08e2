// Discovery of numpy .npz archives (numpy.savez: stored members, savez_compressed: deflated):
// each member NAME.npy is one array with a .npy header (magic "\x93NUMPY", version 1.0 / 2.0 /
// 3.0, a little-endian header length, then a Python dict literal {'descr': '<f4',
// 'fortran_order': False, 'shape': (2, 8, 128, 64), }) followed by the raw elements. The header
// literal is parsed here, never evaluated; object arrays (pickles inside the .npy) are refused.
// Member paths map onto cases: "q.npy" is key q of case "/case", "layer_3/q.npy" and
// "layer_3.q.npy" key q of case "/layer_3".
#include <cctype>
#include <cstring>
#include <map>

#include "core/io/case_assembly.h"
#include "core/io/dump_format.h"
#include "core/io/located_formats.h"

namespace attnscope {

namespace {

constexpr int64_t kMaxHeaderBytes = 65536;

const char* const kNpyHint =
    "the .npz is damaged or not written by numpy.savez; re-save the arrays with numpy.savez";

// What a .npy header declares.
struct NpyHeader {
  std::string descr;  // "<f4"
  bool fortran_order = false;
  std::vector<int64_t> shape;
  int64_t data_offset = 0;  // bytes of magic + header before the elements
};

// A cursor over the header's dict literal.
class Literal {
 public:
  explicit Literal(const std::string& text) : text_(text) {}
  void space() {
    while (at_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[at_]))) ++at_;
  }
  bool eat(char c) {
    space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }
  std::optional<std::string> quoted() {
    space();
    if (at_ >= text_.size() || (text_[at_] != '\'' && text_[at_] != '"')) return std::nullopt;
    const char quote = text_[at_++];
    const size_t end = text_.find(quote, at_);
    if (end == std::string::npos) return std::nullopt;
    std::string s = text_.substr(at_, end - at_);
    at_ = end + 1;
    return s;
  }
  std::optional<int64_t> integer() {
    space();
    int64_t v = 0;
    size_t digits = 0;
    while (at_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[at_]))) {
      if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, text_[at_] - '0', &v)) {
        return std::nullopt;
      }
      ++at_;
      ++digits;
    }
    if (at_ < text_.size() && text_[at_] == 'L') ++at_;  // Python 2's long suffix
    return digits > 0 ? std::optional<int64_t>(v) : std::nullopt;
  }
  bool word(const char* w) {
    space();
    if (text_.compare(at_, std::strlen(w), w) != 0) return false;
    at_ += std::strlen(w);
    return true;
  }

 private:
  const std::string& text_;
  size_t at_ = 0;
};

// Parses "{'descr': ..., 'fortran_order': ..., 'shape': (...), }"; the problem on failure.
std::optional<std::string> parse_dict(const std::string& text, NpyHeader& h) {
  Literal in(text);
  bool descr = false, order = false, shape = false;
  if (!in.eat('{')) return "the header is not a dict literal";
  while (!in.eat('}')) {
    const std::optional<std::string> key = in.quoted();
    if (!key || !in.eat(':')) return "the header's dict literal is malformed";
    if (*key == "descr") {
      const std::optional<std::string> value = in.quoted();
      if (!value) return "'descr' is not a string (a structured dtype)";
      h.descr = *value;
      descr = true;
    } else if (*key == "fortran_order") {
      if (in.word("True"))
        h.fortran_order = true;
      else if (!in.word("False"))
        return "'fortran_order' is not True or False";
      order = true;
    } else if (*key == "shape") {
      if (!in.eat('(')) return "'shape' is not a tuple";
      while (!in.eat(')')) {
        const std::optional<int64_t> dim = in.integer();
        if (!dim || h.shape.size() >= 32) return "'shape' holds something other than sizes";
        h.shape.push_back(*dim);
        if (in.eat(',')) continue;
        if (!in.eat(')')) return "'shape' is malformed";
        break;
      }
      shape = true;
    } else {
      return "unknown header key '" + *key + "'";
    }
    if (!in.eat(',') && !in.eat('}')) return "the header's dict literal is malformed";
  }
  if (!descr || !order || !shape) return "the header lacks descr, fortran_order or shape";
  return std::nullopt;
}

// Reads and parses the header of member `entry` (inflating no more than the header).
Result<NpyHeader> read_header(const ByteStore& zip, const StoreEntry& entry) {
  auto bad = [&](const std::string& problem) {
    return store_error(zip, entry.name, problem, kNpyHint);
  };
  if (entry.size < 10) {
    return bad("too short for a .npy header (" + std::to_string(entry.size) + " bytes)");
  }
  auto head = zip.read_prefix(entry.name, std::min<int64_t>(entry.size, 12 + kMaxHeaderBytes));
  if (!head) return head.error();
  const uint8_t* p = head->data();
  if (std::memcmp(p, "\x93NUMPY", 6) != 0) return bad("not a .npy array (no \\x93NUMPY magic)");
  const int major = p[6];
  if (major < 1 || major > 3) {
    return bad(".npy format version " + std::to_string(major) + " is unknown");
  }
  const size_t prefix = major == 1 ? 10 : 12;
  if (head->size() < prefix) return bad("truncated .npy header");
  const int64_t length =
      major == 1 ? p[8] | p[9] << 8
                 : int64_t{p[8]} | int64_t{p[9]} << 8 | int64_t{p[10]} << 16 | int64_t{p[11]} << 24;
  if (length > kMaxHeaderBytes) {
    return bad("a .npy header of " + std::to_string(length) + " bytes");
  }
  NpyHeader h;
  h.data_offset = static_cast<int64_t>(prefix) + length;
  if (h.data_offset > static_cast<int64_t>(head->size())) {
    return bad("truncated .npy: its header needs " + std::to_string(h.data_offset) +
               " bytes, the member holds " + std::to_string(entry.size));
  }
  const std::string text(head->begin() + static_cast<long>(prefix),
                         head->begin() + static_cast<long>(h.data_offset));
  if (auto problem = parse_dict(text, h)) return bad(*problem);
  return h;
}

// The element type of a descr ("<f4"); the problem in `problem` when it is not one read.
std::optional<DType> descr_dtype(const std::string& descr, bool& big_endian) {
  if (descr.size() != 3) return std::nullopt;
  big_endian = descr[0] == '>';
  const std::string kind = descr.substr(1);
  if (descr[0] != '<' && descr[0] != '>' && descr[0] != '|' && descr[0] != '=') return std::nullopt;
  if (kind == "f2") return DType::f16;
  if (kind == "f4") return DType::f32;
  if (kind == "f8") return DType::f64;
  if (kind == "b1") return DType::boolean;
  if (kind == "u1") return DType::u8;
  if (kind == "i4") return DType::i32;
  if (kind == "i8") return DType::i64;
  return std::nullopt;
}

// "layer_3/q.npy" -> {"layer_3", "q"}; "layers.3.q.npy" -> {"layers", "3", "q"}.
std::vector<std::string> split_key(const std::string& name) {
  std::vector<std::string> out(1);
  for (char c : name.substr(0, name.size() - 4)) {
    if (c == '/' || c == '.')
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

}  // namespace

Result<DumpListing> discover_npz(const ByteStore& zip, const OpenOptions& options) {
  std::map<std::vector<std::string>, FoundGroup> groups;
  for (const StoreEntry& entry : zip.entries()) {
    if (entry.name.size() < 5 || entry.name.compare(entry.name.size() - 4, 4, ".npy") != 0)
      continue;
    std::vector<std::string> segments = split_key(entry.name);
    const std::string key = segments.back();
    segments.pop_back();
    FoundGroup& group = groups[segments];
    group.segments = segments;
    Result<NpyHeader> h = read_header(zip, entry);
    FoundTensor t;
    t.key = key;
    if (!h) {
      t.problem = h.error().message.substr(zip.name().size() + 2);
      t.hint = h.error().hint;
      group.tensors.push_back(std::move(t));
      continue;
    }
    t.shape = h->shape;
    t.where.entry = entry.name;
    t.where.offset = h->data_offset;
    bool big = false;
    const std::optional<DType> dtype = descr_dtype(h->descr, big);
    t.where.big_endian = big;
    t.where.strides = contiguous_strides(t.shape);
    if (h->fortran_order) {
      std::vector<int64_t> reversed(t.shape.rbegin(), t.shape.rend());
      std::vector<int64_t> strides = contiguous_strides(reversed);
      t.where.strides.assign(strides.rbegin(), strides.rend());
    }
    const size_t size = dtype ? dtype_size(*dtype) : 1;
    const std::optional<ByteSpan> span = element_span(t.shape, t.where, size);
    if (!dtype) {
      t.problem =
          "element type '" + h->descr + "' is not one attnscope reads" +
          (h->descr.find('O') != std::string::npos ? " (an object array holds pickles)" : "");
    } else if (!span || span->first + span->bytes > entry.size) {
      t.problem = "truncated .npy: shape " + shape_text(t.shape) + " of '" + h->descr + "' needs " +
                  (span ? std::to_string(span->bytes) : std::string("too many")) +
                  " bytes of data, the member holds " + std::to_string(entry.size - h->data_offset);
      t.hint = kNpyHint;
    } else {
      t.dtype = *dtype;
    }
    const std::string field = field_alias(key);
    if (field.empty()) {
      group.tensors.push_back(std::move(t));
    } else if (t.problem.empty() && span->bytes == static_cast<int64_t>(size)) {
      auto bytes = zip.read(entry.name, t.where.offset, static_cast<int64_t>(size));
      if (!bytes) return bytes.error();
      HostTensor one = gather_tensor(t.dtype, {1}, {"", 0, {1}, big}, bytes->data());
      group.scalars.emplace_back(field, one.at(0));
    }
  }
  std::vector<FoundGroup> found;
  for (auto& [segments, group] : groups) found.push_back(std::move(group));
  DumpListing listing;
  listing.format = dump_format_name(DumpFormat::npz);
  assemble_cases(found, zip.name(), options, listing);
  if (listing.cases.empty() && listing.rejected.empty()) {
    return make_error(ErrorCode::format,
                      zip.name() +
                          ": neither a torch.save file (no data.pkl) nor an .npz with "
                          "arrays q, k, v (no case found)",
                      "save the arrays with numpy.savez(path, q=q, k=k, v=v, ...) or the tensors "
                      "with torch.save({'q': q, 'k': k, 'v': v, ...}, path)");
  }
  return listing;
}

}  // namespace attnscope
