// A restricted unpickler for the data.pkl of a torch.save file (internal to core/io). A pickle
// is a program: the opcodes GLOBAL / STACK_GLOBAL import any Python object and REDUCE calls
// it, which is how a hostile .pt runs os.system. This machine runs the opcodes itself and never
// imports or calls anything: it knows the few globals torch.save writes for a dict of tensors
// (torch._utils._rebuild_tensor_v2 / _rebuild_parameter, collections.OrderedDict, the
// torch.*Storage types of persistent ids, torch dtypes as values, torch.Size and torch.device
// rebuilt as a tuple and a text) and refuses any other global
// at the opcode that names it, before anything could use it. Its result is a tree of plain
// values (None, bool, int, float, str, bytes, tuple, list, dict) with tensors as leaves.
// Resources are bounded: nodes, stack, memo and marks have limits, lengths are checked against
// the bytes left before anything is allocated, and the values live in one arena (indices, no
// ownership cycles), so a self-referencing list costs nothing to build or free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace attnscope {

struct PickleNode {
  enum class Kind : uint8_t {
    none,
    boolean,
    integer,
    real,
    text,
    bytes,
    tuple,
    list,
    dict,
    global,
    storage,
    tensor
  };
  Kind kind = Kind::none;
  int64_t integer = 0;          // boolean / integer; storage / tensor: index into their lists
  double real = 0;              // real
  std::string text;             // text / bytes; global: "module.name"
  std::vector<uint32_t> items;  // tuple / list: node indices; dict: key, value, key, value, ...
};

// A storage a persistent id names: the member "<archive>/data/<key>" holds `numel` elements
// of `type` ("FloatStorage", "BFloat16Storage", "UntypedStorage" = bytes, ...).
struct PickleStorage {
  std::string key;
  std::string type;
  int64_t numel = 0;
};

// A tensor view of a storage (torch._utils._rebuild_tensor_v2): element [i0, i1, ...] lies at
// storage element offset + sum_k i_k * stride[k].
struct PickleTensor {
  size_t storage = 0;  // index into PickleProgram::storages
  int64_t offset = 0;  // in elements of the storage type
  std::vector<int64_t> size, stride;
};

struct PickleProgram {
  std::vector<PickleNode> nodes;  // the arena; every index in it is < nodes.size()
  std::vector<PickleStorage> storages;
  std::vector<PickleTensor> tensors;
  uint32_t root = 0;  // what STOP returned
};

struct PickleLimits {
  size_t max_nodes = size_t{1} << 21;
  size_t max_stack = size_t{1} << 21;
  size_t max_memo = size_t{1} << 21;
  size_t max_marks = size_t{1} << 16;
};

// Runs the pickle `data` (protocols 0 to 5; protocol 0's text persistent ids, which torch.load
// cannot read either, are refused). Errors name `name` and the byte
// offset of the opcode: unsupported for a refused global ("refuses the global 'os.system'"),
// a call of anything but the allowed rebuilds, an object-building opcode (NEWOBJ, INST, ...)
// or out-of-band buffers; too_large past a limit; format for malformed input (truncated,
// stack underflow, a memo key never stored, wrong argument types).
Result<PickleProgram> run_pickle(const uint8_t* data, size_t size, const std::string& name,
                                 const PickleLimits& limits = {});

}  // namespace attnscope
