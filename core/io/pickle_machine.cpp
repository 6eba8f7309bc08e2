// The restricted unpickler (see pickle_machine.h): one pass over the opcodes with an explicit
// stack of node indices, a mark stack and a memo; allowed globals become `global` nodes that
// only REDUCE / BINPERSID interpret, and every other global is refused where it is named.
#include "core/io/pickle_machine.h"

#include "core/io/pickle_text.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace attnscope {

namespace {

using Kind = PickleNode::Kind;

const char* const kRefusedHint =
    "the file would run code when loaded: do not torch.load it. attnscope reads only tensors, "
    "dicts, lists and scalars; if you trust the file, load it and re-save the tensors as a plain "
    "dict: torch.save({'q': q, 'k': k, 'v': v, ...}, path)";
const char* const kCorruptHint =
    "the .pt file is damaged or not written by torch.save; re-save it with torch.save";
const char* const kUnsupportedHint =
    "attnscope reads what torch.save writes for a dict or list of tensors and scalars; re-save "
    "the data as such a dict";
const char* const kLimitHint = "a dump's pickle holds a few values per tensor; this one is crafted";

// Storage types torch.save names in persistent ids (torch.<Type>), and torch dtypes it may
// store as values; torch.Size and torch.device (shapes and devices next to the tensors) are
// rebuilt as a tuple and a text; anything else from torch is refused.
constexpr const char* kStorageTypes[] = {
    "FloatStorage",  "HalfStorage", "BFloat16Storage",     "DoubleStorage",
    "BoolStorage",   "ByteStorage", "CharStorage",         "ShortStorage",
    "IntStorage",    "LongStorage", "ComplexFloatStorage", "ComplexDoubleStorage",
    "UntypedStorage"};
constexpr const char* kDtypes[] = {"float16", "half",   "bfloat16", "float32", "float",
                                   "float64", "double", "bool",     "uint8",   "int8",
                                   "int16",   "int32",  "int64",    "long",    "int"};

bool allowed_global(const std::string& module, const std::string& name) {
  if (module == "torch._utils") return name == "_rebuild_tensor_v2" || name == "_rebuild_parameter";
  if (module == "collections") return name == "OrderedDict";
  if (module == "torch.storage") return name == "UntypedStorage";
  if (module != "torch") return false;
  if (name == "Size" || name == "device") return true;
  for (const char* t : kStorageTypes) {
    if (name == t) return true;
  }
  for (const char* t : kDtypes) {
    if (name == t) return true;
  }
  return false;
}

class Machine {
 public:
  Machine(const uint8_t* data, size_t size, const std::string& name, const PickleLimits& limits)
      : data_(data), size_(size), name_(name), limits_(limits) {}

  Result<PickleProgram> run() {
    while (!error_) {
      if (at_ >= size_) {
        fail("the pickle ends without STOP");
        break;
      }
      op_at_ = at_;
      const uint8_t op = data_[at_++];
      if (op == '.') {
        if (stack_.size() <= base()) fail("STOP with an empty stack");
        break;
      }
      step(op);
    }
    if (error_) return *error_;
    out_.root = stack_.back();
    return std::move(out_);
  }

 private:
  // ---- errors ----
  Error make(ErrorCode code, const std::string& problem, const char* hint) const {
    return make_error(code, name_ + ": " + problem + " (at byte " + std::to_string(op_at_) + ")",
                      hint);
  }
  void fail(const std::string& problem) {
    if (!error_) error_ = make(ErrorCode::format, problem, kCorruptHint);
  }
  void refuse(const std::string& problem, const char* hint = kRefusedHint) {
    if (!error_) error_ = make(ErrorCode::unsupported, problem, hint);
  }
  void limit(const std::string& problem) {
    if (!error_) error_ = make(ErrorCode::too_large, problem, kLimitHint);
  }

  // ---- input ----
  bool need(size_t n) {
    if (size_ - at_ >= n) return true;
    fail("the pickle is truncated");
    return false;
  }
  uint64_t little(size_t n) {
    if (!need(n)) return 0;
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | data_[at_ + i];
    at_ += n;
    return v;
  }
  std::string bytes(uint64_t n) {
    if (n > size_ - at_) {
      fail("a string of " + std::to_string(n) + " bytes runs past the end of the pickle");
      return {};
    }
    std::string s(reinterpret_cast<const char*>(data_ + at_), static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return s;
  }
  std::string line() {
    const void* end = std::memchr(data_ + at_, '\n', size_ - at_);
    if (end == nullptr) {
      fail("a text argument (GLOBAL, INT, FLOAT, ...) without its newline");
      return {};
    }
    const size_t n = static_cast<size_t>(static_cast<const uint8_t*>(end) - (data_ + at_));
    std::string s = bytes(n);
    ++at_;
    return s;
  }

  // ---- nodes and stack ----
  uint32_t add(PickleNode node) {
    if (error_) return 0;
    if (out_.nodes.size() >= limits_.max_nodes) {
      limit("more than " + std::to_string(limits_.max_nodes) + " values in the pickle");
      return 0;
    }
    out_.nodes.push_back(std::move(node));
    return static_cast<uint32_t>(out_.nodes.size() - 1);
  }
  void push(uint32_t node) {
    if (error_) return;
    if (stack_.size() >= limits_.max_stack) return limit("the pickle's stack grows past its limit");
    stack_.push_back(node);
  }
  void push_new(PickleNode node) {
    const uint32_t index = add(std::move(node));
    push(index);
  }
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  bool has(size_t n) {
    if (stack_.size() >= base() + n) return true;
    fail("stack underflow");
    return false;
  }
  uint32_t pop() {
    if (!has(1)) return 0;
    const uint32_t top = stack_.back();
    stack_.pop_back();
    return top;
  }
  PickleNode& node(uint32_t index) { return out_.nodes[index]; }
  // The items above the last mark, removed with the mark.
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) {
      fail("an opcode needs a MARK that was never set");
      return {};
    }
    std::vector<uint32_t> items(stack_.begin() + static_cast<long>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  void container(Kind kind, std::vector<uint32_t> items) {
    PickleNode n;
    n.kind = kind;
    n.items = std::move(items);
    push_new(std::move(n));
  }
  // The list / dict on top of the stack that APPEND(S) / SETITEM(S) fill; nullptr on error.
  PickleNode* target(Kind kind) {
    if (!has(1)) return nullptr;
    PickleNode& n = node(stack_.back());
    if (n.kind != kind) {
      fail(std::string(kind == Kind::list ? "APPEND" : "SETITEM") + " into a value that is not a " +
           (kind == Kind::list ? "list" : "dict"));
      return nullptr;
    }
    return &n;
  }
  void extend(Kind kind, const std::vector<uint32_t>& items) {
    if (error_) return;
    if (kind == Kind::dict && items.size() % 2 != 0) {
      fail("SETITEMS with an odd number of items");
      return;
    }
    if (PickleNode* n = target(kind)) n->items.insert(n->items.end(), items.begin(), items.end());
  }

  // ---- memo ----
  void memo_put(uint64_t key) {
    if (!has(1)) return;
    if (memo_.size() >= limits_.max_memo && !memo_.count(key)) {
      return limit("the pickle's memo grows past its limit");
    }
    memo_[key] = stack_.back();
  }
  void memo_get(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) {
      fail("memo key " + std::to_string(key) + " was never stored");
      return;
    }
    push(it->second);
  }

  // ---- globals, calls, persistent ids ----
  void global(const std::string& module, const std::string& name) {
    if (error_) return;
    if (module == "torch._utils" && name == "_rebuild_tensor_v3") {
      refuse(
          "holds a tensor of an element type torch saves with _rebuild_tensor_v3 (uint16, "
          "uint32, uint64: no float or mask type attnscope reads)",
          "save q, k, v and the outputs as float16 / bfloat16 / float32 / float64 and masks "
          "as bool / uint8 (tensor.to(torch.float32)); the file itself is harmless");
      return;
    }
    if (!allowed_global(module, name)) {
      refuse("refuses the global '" + module + "." + name +
             "': attnscope never imports or calls anything named in a file; a .pt may name "
             "only tensor rebuilds, storages and OrderedDict");
      return;
    }
    PickleNode n;
    n.kind = Kind::global;
    n.text = module + "." + name;
    push_new(std::move(n));
  }
  const PickleNode* arg(const std::vector<uint32_t>& args, size_t i, Kind kind) {
    if (i < args.size() && node(args[i]).kind == kind) return &node(args[i]);
    fail("argument " + std::to_string(i + 1) + " of a tensor rebuild has the wrong type");
    return nullptr;
  }
  bool int_tuple(const PickleNode* n, std::vector<int64_t>& out) {
    if (n == nullptr) return false;
    for (uint32_t item : n->items) {
      if (node(item).kind != Kind::integer) {
        fail("a tensor size or stride that is not an integer");
        return false;
      }
      out.push_back(node(item).integer);
    }
    return true;
  }
  void reduce() {
    const uint32_t args_index = pop();
    const uint32_t callable = pop();
    if (error_) return;
    const PickleNode& f = node(callable);
    if (f.kind != Kind::global) return fail("REDUCE calls a value that is not a global");
    if (node(args_index).kind != Kind::tuple) return fail("REDUCE without an argument tuple");
    const std::vector<uint32_t> args = node(args_index).items;
    if (f.text == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(args);
    if (f.text == "torch._utils._rebuild_parameter") {
      if (args.size() != 3 || node(args[0]).kind != Kind::tensor) {
        return fail("_rebuild_parameter without a tensor");
      }
      return push(args[0]);
    }
    if (f.text == "collections.OrderedDict") {
      PickleNode dict;
      dict.kind = Kind::dict;
      if (args.size() == 1 && node(args[0]).kind == Kind::list) {
        for (uint32_t pair : node(args[0]).items) {
          const PickleNode& p = node(pair);
          if (p.kind != Kind::tuple || p.items.size() != 2)
            return fail("OrderedDict item is no pair");
          dict.items.insert(dict.items.end(), p.items.begin(), p.items.end());
        }
      } else if (!args.empty()) {
        return fail("OrderedDict with unexpected arguments");
      }
      return push_new(std::move(dict));
    }
    if (f.text == "torch.Size") {  // a tuple of ints
      if (args.size() != 1 ||
          (node(args[0]).kind != Kind::tuple && node(args[0]).kind != Kind::list)) {
        return fail("torch.Size without a sequence");
      }
      return container(Kind::tuple, node(args[0]).items);
    }
    if (f.text == "torch.device") {  // its text, "cuda:0"
      if (args.empty() || args.size() > 2 || node(args[0]).kind != Kind::text ||
          (args.size() == 2 && node(args[1]).kind != Kind::integer)) {
        return fail("torch.device with unexpected arguments");
      }
      PickleNode n;
      n.kind = Kind::text;
      n.text = node(args[0]).text +
               (args.size() == 2 ? ":" + std::to_string(node(args[1]).integer) : std::string());
      return push_new(std::move(n));
    }
    refuse("refuses to call '" + f.text +
           "': only tensor rebuilds, OrderedDict, torch.Size and torch.device are called");
  }
  void rebuild_tensor(const std::vector<uint32_t>& args) {
    // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
    if (args.size() < 6 || args.size() > 7) return fail("_rebuild_tensor_v2 with wrong arguments");
    const PickleNode* storage = arg(args, 0, Kind::storage);
    const PickleNode* offset = arg(args, 1, Kind::integer);
    PickleTensor t;
    if (storage == nullptr || offset == nullptr || !int_tuple(arg(args, 2, Kind::tuple), t.size) ||
        !int_tuple(arg(args, 3, Kind::tuple), t.stride)) {
      return;
    }
    t.storage = static_cast<size_t>(storage->integer);
    t.offset = offset->integer;
    PickleNode n;
    n.kind = Kind::tensor;
    n.integer = static_cast<int64_t>(out_.tensors.size());
    out_.tensors.push_back(std::move(t));
    push_new(std::move(n));
  }
  void persistent_id() {
    // ("storage", torch.<Type>Storage, key, location, numel)
    const uint32_t pid = pop();
    if (error_) return;
    const PickleNode& t = node(pid);
    if (t.kind != Kind::tuple || t.items.size() != 5 || node(t.items[0]).kind != Kind::text ||
        node(t.items[0]).text != "storage" || node(t.items[1]).kind != Kind::global ||
        node(t.items[2]).kind != Kind::text || node(t.items[4]).kind != Kind::integer) {
      return fail("a persistent id that is not a torch storage");
    }
    const std::string& type = node(t.items[1]).text;
    const size_t dot = type.rfind('.');
    PickleStorage s{node(t.items[2]).text, type.substr(dot + 1), node(t.items[4]).integer};
    if (type.size() < 7 || type.compare(type.size() - 7, 7, "Storage") != 0) {
      return fail("a persistent id names '" + type + "', not a storage type");
    }
    PickleNode n;
    n.kind = Kind::storage;
    n.integer = static_cast<int64_t>(out_.storages.size());
    out_.storages.push_back(std::move(s));
    push_new(std::move(n));
  }
  void build() {
    const uint32_t state = pop();
    if (!has(1)) return;
    const PickleNode& s = node(state);
    if (s.kind == Kind::none || (s.kind == Kind::dict && s.items.empty())) return;
    refuse("refuses BUILD with object state: only plain values and tensors are read");
  }

  void scalar(Kind kind, int64_t integer, double real = 0) {
    PickleNode n;
    n.kind = kind;
    n.integer = integer;
    n.real = real;
    push_new(std::move(n));
  }
  void text(Kind kind, uint64_t length) {
    PickleNode n;
    n.kind = kind;
    n.text = bytes(length);
    if (!error_) push_new(std::move(n));
  }
  // A protocol 0 text argument parsed by `parse`; fails naming `opcode` when it is malformed.
  template <typename Parse>
  auto text_argument(const char* opcode, Parse parse) -> decltype(parse(std::string())) {
    const std::string arg = line();
    if (error_) return std::nullopt;
    auto value = parse(arg);
    if (!value) fail(std::string("a malformed ") + opcode + " argument");
    return value;
  }
  std::optional<uint64_t> text_memo_key() {
    const std::optional<int64_t> key = text_argument("memo key", parse_pickle_long);
    if (key && *key < 0) {
      fail("a negative memo key");
      return std::nullopt;
    }
    return key ? std::optional<uint64_t>(static_cast<uint64_t>(*key)) : std::nullopt;
  }

  void wide_integer(uint64_t length) {
    if (length > 8) return fail("an integer wider than 64 bits");
    if (!need(static_cast<size_t>(length))) return;
    uint64_t v = little(static_cast<size_t>(length));
    if (length > 0 && length < 8 && (v >> (8 * length - 1)) & 1) v |= ~uint64_t{0} << (8 * length);
    scalar(Kind::integer, static_cast<int64_t>(v));
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        if (little(1) > 5) fail("pickle protocol newer than 5");
        break;
      case 0x95:
        little(8);
        break;  // FRAME: a length hint only
      case '(':
        if (marks_.size() >= limits_.max_marks) {
          limit("MARKs nested deeper than " + std::to_string(limits_.max_marks));
        } else {
          marks_.push_back(stack_.size());
        }
        break;
      case '0':  // POP (of the mark when nothing is above it)
        if (stack_.size() > base())
          stack_.pop_back();
        else if (!marks_.empty())
          marks_.pop_back();
        else
          fail("POP of an empty stack");
        break;
      case '1':
        pop_mark();
        break;
      case '2':  // DUP
        if (has(1)) push(stack_.back());
        break;
      case 'N':
        scalar(Kind::none, 0);
        break;
      case 0x88:
        scalar(Kind::boolean, 1);
        break;
      case 0x89:
        scalar(Kind::boolean, 0);
        break;
      case 'J':
        wide_integer(4);
        break;
      case 'K':
        scalar(Kind::integer, static_cast<int64_t>(little(1)));
        break;
      case 'M':
        scalar(Kind::integer, static_cast<int64_t>(little(2)));
        break;
      case 0x8a:
        wide_integer(little(1));
        break;
      case 0x8b:
        wide_integer(little(4));
        break;
      case 'G': {
        if (!need(8)) break;
        uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits = bits << 8 | data_[at_++];
        double v;
        std::memcpy(&v, &bits, sizeof v);
        scalar(Kind::real, 0, v);
        break;
      }
      case 'X':
        text(Kind::text, little(4));
        break;
      case 0x8c:
        text(Kind::text, little(1));
        break;
      case 0x8d:
        text(Kind::text, little(8));
        break;
      case 'T':
        text(Kind::text, little(4));
        break;
      case 'U':
        text(Kind::text, little(1));
        break;
      case 'B':
        text(Kind::bytes, little(4));
        break;
      case 'C':
        text(Kind::bytes, little(1));
        break;
      case 0x8e:
        text(Kind::bytes, little(8));
        break;
      case '}':
        container(Kind::dict, {});
        break;
      case ']':
        container(Kind::list, {});
        break;
      case ')':
        container(Kind::tuple, {});
        break;
      case 'd': {
        std::vector<uint32_t> items = pop_mark();
        if (items.size() % 2 != 0) return fail("DICT with an odd number of items");
        if (!error_) container(Kind::dict, std::move(items));
        break;
      }
      case 'l':
      case 't': {
        std::vector<uint32_t> items = pop_mark();
        if (!error_) container(op == 'l' ? Kind::list : Kind::tuple, std::move(items));
        break;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t n = op - 0x84u;
        if (!has(n)) break;
        std::vector<uint32_t> items(stack_.end() - static_cast<long>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        container(Kind::tuple, std::move(items));
        break;
      }
      case 'a': {
        const uint32_t value = pop();
        extend(Kind::list, {value});
        break;
      }
      case 'e': {
        std::vector<uint32_t> items = pop_mark();
        extend(Kind::list, items);
        break;
      }
      case 's': {
        const uint32_t value = pop();
        const uint32_t key = pop();
        extend(Kind::dict, {key, value});
        break;
      }
      case 'u': {
        std::vector<uint32_t> items = pop_mark();
        extend(Kind::dict, items);
        break;
      }
      case 'q':
        memo_put(little(1));
        break;
      case 'r':
        memo_put(little(4));
        break;
      case 0x94:
        memo_put(memo_.size());
        break;
      case 'h':
        memo_get(little(1));
        break;
      case 'j':
        memo_get(little(4));
        break;
      case 'c': {
        const std::string module = line();
        const std::string name = error_ ? std::string() : line();
        global(module, name);
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        const uint32_t name = pop();
        const uint32_t module = pop();
        if (error_) break;
        if (node(module).kind != Kind::text || node(name).kind != Kind::text) {
          return fail("STACK_GLOBAL without two strings");
        }
        global(node(module).text, node(name).text);
        break;
      }
      // Protocol 0 text forms (protocol 1 still writes booleans as INT "01" / "00").
      case 'I':
        if (auto v = text_argument("INT", parse_pickle_int)) {
          scalar(v->boolean ? Kind::boolean : Kind::integer, v->value);
        }
        break;
      case 'L':
        if (auto v = text_argument("LONG", parse_pickle_long)) scalar(Kind::integer, *v);
        break;
      case 'F':
        if (auto v = text_argument("FLOAT", parse_pickle_float)) scalar(Kind::real, 0, *v);
        break;
      case 'S':
      case 'V':
        if (auto v = text_argument(op == 'S' ? "STRING" : "UNICODE",
                                   op == 'S' ? parse_pickle_string : parse_pickle_unicode)) {
          PickleNode n;
          n.kind = Kind::text;
          n.text = std::move(*v);
          push_new(std::move(n));
        }
        break;
      case 'p':
        if (auto key = text_memo_key()) memo_put(*key);
        break;
      case 'g':
        if (auto key = text_memo_key()) memo_get(*key);
        break;
      case 'R':
        reduce();
        break;
      case 'Q':
        persistent_id();
        break;
      case 'b':
        build();
        break;
      case 'P':  // torch.save(..., pickle_protocol=0): its storages are named by repr() text
        refuse(
            "holds text persistent ids (pickle protocol 0), which name torch storages by their "
            "repr(); torch.load cannot read such a file either",
            "re-save it with torch.save's default pickle protocol (or any protocol from 1 to 5)");
        break;
      case 0x81:
      case 0x92:
      case 'i':
      case 'o':
        refuse(
            "refuses an object-building opcode (NEWOBJ / INST / OBJ): only plain values and "
            "tensors are read");
        break;
      case 0x82:
      case 0x83:
      case 0x84:
        refuse("refuses an extension-registry global (opcode EXT)");
        break;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        refuse(std::string("refuses opcode ") + hex +
                   " (set, frozenset or out-of-band buffer opcodes are not read)",
               kUnsupportedHint);
      }
    }
  }

  const uint8_t* data_;
  size_t size_;
  const std::string& name_;
  PickleLimits limits_;
  size_t at_ = 0, op_at_ = 0;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;  // stack sizes at each MARK
  std::unordered_map<uint64_t, uint32_t> memo_;
  PickleProgram out_;
  std::optional<Error> error_;
};

}  // namespace

Result<PickleProgram> run_pickle(const uint8_t* data, size_t size, const std::string& name,
                                 const PickleLimits& limits) {
  return Machine(data, size, name, limits).run();
}

}  // namespace attnscope
