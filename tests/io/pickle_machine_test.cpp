// The restricted unpickler (core/io/pickle_machine.h) on hand-assembled pickles: what torch.save
// writes is read; globals outside the allowlist, calls, object-building opcodes and the
// resource bombs (DUP, MARK nesting, memo keys, huge lengths) are refused with messages that
// name them; and the strided gather of tensor views (core/io/tensor_location.h).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/io/pickle_machine.h"
#include "core/io/tensor_location.h"

namespace attnscope {
namespace {

using Kind = PickleNode::Kind;

// Pickle assembly: opcodes as bytes.
struct Asm {
  std::string b = "\x80\x02";
  Asm& op(char c) {
    b += c;
    return *this;
  }
  Asm& raw(const std::string& s) {
    b += s;
    return *this;
  }
  Asm& u8(int v) { return op(static_cast<char>(v)); }
  Asm& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) u8(static_cast<int>((v >> (8 * i)) & 0xff));
    return *this;
  }
  Asm& text(const std::string& s) { return op('X').u32(static_cast<uint32_t>(s.size())).raw(s); }
  Asm& global(const std::string& module, const std::string& name) {
    return op('c').raw(module + "\n" + name + "\n");
  }
  Asm& integer(int v) { return op('K').u8(v); }
  Result<PickleProgram> run(const PickleLimits& limits = {}) const {
    const std::string stopped = b + ".";
    return run_pickle(reinterpret_cast<const uint8_t*>(stopped.data()), stopped.size(), "t.pkl",
                      limits);
  }
};

// {"q": _rebuild_tensor_v2(storage('0', FloatStorage, 6 elements), 1, (2, 2), (1, 2), False,
// OrderedDict()), "scale": 0.5}
Asm tensor_dict() {
  Asm a;
  a.op('}').op('(').text("q").global("torch._utils", "_rebuild_tensor_v2").op('(');
  a.op('(').text("storage").global("torch", "FloatStorage").text("0").text("cpu").integer(6);
  a.op('t').op('Q').integer(1).integer(2).integer(2).u8(0x86).integer(1).integer(2).u8(0x86);
  a.u8(0x89).global("collections", "OrderedDict").op(')').op('R').op('t').op('R');
  a.text("scale").op('G').raw(std::string("\x3f\xe0\0\0\0\0\0\0", 8)).op('u');
  return a;
}

void expect_refused(const Result<PickleProgram>& r, ErrorCode code, const std::string& text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, code);
  EXPECT_NE(r.error().message.find(text), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.rfind("t.pkl: ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find("(at byte "), std::string::npos);
  EXPECT_FALSE(r.error().hint.empty());
}

TEST(Pickle, torch_tensor_rebuild_dict_reads_as_values) {
  const Result<PickleProgram> p = tensor_dict().run();
  ASSERT_TRUE(p.ok()) << p.error().describe();
  const PickleNode& root = p->nodes[p->root];
  ASSERT_EQ(root.kind, Kind::dict);
  ASSERT_EQ(root.items.size(), 4u);
  EXPECT_EQ(p->nodes[root.items[0]].text, "q");
  ASSERT_EQ(p->nodes[root.items[1]].kind, Kind::tensor);
  ASSERT_EQ(p->tensors.size(), 1u);
  EXPECT_EQ(p->tensors[0].offset, 1);
  EXPECT_EQ(p->tensors[0].size, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(p->tensors[0].stride, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(p->storages[0].type, "FloatStorage");
  EXPECT_EQ(p->storages[0].numel, 6);
  EXPECT_EQ(p->nodes[root.items[3]].real, 0.5);
}

TEST(Pickle, global_os_system_is_refused_where_it_is_named) {
  Asm a;
  a.global("os", "system").text("touch /tmp/x").u8(0x85).op('R');
  expect_refused(a.run(), ErrorCode::unsupported, "refuses the global 'os.system'");
}

TEST(Pickle, stack_global_posix_system_is_refused) {
  Asm a;
  a.text("posix").text("system").u8(0x93).text("id").u8(0x85).op('R');
  expect_refused(a.run(), ErrorCode::unsupported, "refuses the global 'posix.system'");
}

TEST(Pickle, builtins_eval_and_torch_load_are_refused) {
  for (const auto& [module, name] : {std::pair<std::string, std::string>{"builtins", "eval"},
                                     {"torch", "load"},
                                     {"torch._utils", "_rebuild_from_type_v2"},
                                     {"__builtin__", "getattr"}}) {
    Asm a;
    a.global(module, name);
    expect_refused(a.run(), ErrorCode::unsupported, "refuses the global '" + module + "." + name);
  }
}

TEST(Pickle, torch_size_and_device_become_a_tuple_and_a_text) {
  Asm a;  // (torch.Size((2, 3)), torch.device("cuda", 1))
  a.global("torch", "Size").integer(2).integer(3).u8(0x86).u8(0x85).op('R');
  a.global("torch", "device").text("cuda").integer(1).u8(0x86).op('R').u8(0x86);
  const Result<PickleProgram> p = a.run();
  ASSERT_TRUE(p.ok()) << p.error().describe();
  const PickleNode& root = p->nodes[p->root];
  ASSERT_EQ(root.items.size(), 2u);
  EXPECT_EQ(p->nodes[root.items[0]].kind, Kind::tuple);
  EXPECT_EQ(p->nodes[root.items[0]].items.size(), 2u);
  EXPECT_EQ(p->nodes[root.items[1]].text, "cuda:1");
}

TEST(Pickle, calling_an_allowed_storage_type_is_refused) {
  Asm a;
  a.global("torch", "FloatStorage").integer(3).u8(0x85).op('R');
  expect_refused(a.run(), ErrorCode::unsupported, "refuses to call 'torch.FloatStorage'");
}

TEST(Pickle, object_building_and_build_state_are_refused) {
  Asm newobj;
  newobj.global("collections", "OrderedDict").op(')').u8(0x81);
  expect_refused(newobj.run(), ErrorCode::unsupported, "object-building opcode");
  Asm build;
  build.op(']').op('}').text("x").integer(1).op('s').op('b');
  expect_refused(build.run(), ErrorCode::unsupported, "BUILD with object state");
  Asm set;
  set.u8(0x8f);
  expect_refused(set.run(), ErrorCode::unsupported, "refuses opcode 0x8f");
}

TEST(Pickle, dup_bomb_stops_at_the_stack_limit) {
  Asm a;
  a.op('N');
  a.b += std::string(5000, '2');
  PickleLimits limits;
  limits.max_stack = 1000;
  expect_refused(a.run(limits), ErrorCode::too_large, "stack grows past its limit");
}

TEST(Pickle, mark_nesting_bomb_stops_at_the_mark_limit) {
  Asm a;
  a.b += std::string(70000, '(');
  expect_refused(a.run(), ErrorCode::too_large, "MARKs nested deeper than 65536");
}

TEST(Pickle, huge_memo_index_is_never_allocated) {
  Asm get;
  get.op('j').u32(0xfffffff0u);
  expect_refused(get.run(), ErrorCode::format, "memo key 4294967280 was never stored");
  Asm put;
  put.op('N').op('r').u32(0xfffffff0u).op('j').u32(0xfffffff0u);
  EXPECT_TRUE(put.run().ok());
}

TEST(Pickle, lengths_beyond_the_input_and_truncation_are_errors) {
  Asm text;
  text.op('X').u32(0x7fffffffu);
  expect_refused(text.run(), ErrorCode::format, "runs past the end of the pickle");
  const std::string cut = tensor_dict().b.substr(0, 40);
  const Result<PickleProgram> p =
      run_pickle(reinterpret_cast<const uint8_t*>(cut.data()), cut.size(), "t.pkl");
  ASSERT_FALSE(p.ok());
  Asm under;
  under.op('a');
  expect_refused(under.run(), ErrorCode::format, "stack underflow");
}

TEST(Pickle, protocol_0_text_opcodes_read_as_their_values) {
  Asm a;  // (True, -12, 12L, 0.375, 'a\'b', u'\u00e9x', memo put / get by text key)
  a.b = "(I01\nI-12\nL12L\nF0.375\nS'a\\'b'\nV\\u00e9x\np7\ng7\nt";
  const Result<PickleProgram> p = a.run();
  ASSERT_TRUE(p.ok()) << p.error().describe();
  const PickleNode& root = p->nodes[p->root];
  ASSERT_EQ(root.items.size(), 7u);
  EXPECT_EQ(p->nodes[root.items[0]].kind, Kind::boolean);
  EXPECT_EQ(p->nodes[root.items[0]].integer, 1);
  EXPECT_EQ(p->nodes[root.items[1]].integer, -12);
  EXPECT_EQ(p->nodes[root.items[2]].integer, 12);
  EXPECT_EQ(p->nodes[root.items[3]].real, 0.375);
  EXPECT_EQ(p->nodes[root.items[4]].text, "a'b");
  EXPECT_EQ(p->nodes[root.items[5]].text, "\xc3\xa9x");
  EXPECT_EQ(root.items[6], root.items[5]);
}

TEST(Pickle, malformed_text_arguments_and_text_persistent_ids_are_refused) {
  for (const char* bad :
       {"I1x\n", "Fnope\n", "S'open\n", "L99999999999999999999\n", "V\\u12\n", "I5"}) {
    Asm a;
    a.b = bad;
    const Result<PickleProgram> p = a.run();
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().code, ErrorCode::format) << p.error().message;
  }
  Asm persid;
  persid.b = "(P('storage', <class 'torch.FloatStorage'>, '0', 'cpu', 4)\n";
  expect_refused(persid.run(), ErrorCode::unsupported, "torch.load cannot read such a file either");
}

TEST(Pickle, self_referencing_list_is_built_without_cycles_of_ownership) {
  Asm a;  // l = []; l.append(l)
  a.op(']').op('q').u8(0).op('h').u8(0).op('a');
  const Result<PickleProgram> p = a.run();
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->nodes[p->root].items, std::vector<uint32_t>{p->root});
}

TEST(TensorLocation, gather_honours_offset_strides_and_byte_order) {
  // Storage of 8 float32 0..7; view offset 1, shape [2, 3], strides [1, 2] -> [[1,3,5],[2,4,6]].
  std::vector<uint8_t> storage(32);
  for (int i = 0; i < 8; ++i) {
    const float v = static_cast<float>(i);
    std::memcpy(storage.data() + 4 * i, &v, 4);
  }
  const TensorLocation at{"", 4, {1, 2}, false};
  const std::optional<ByteSpan> span = element_span({2, 3}, at, 4);
  ASSERT_TRUE(span);
  EXPECT_EQ(span->first, 4);
  EXPECT_EQ(span->bytes, 24);  // elements 1..6
  const HostTensor t = gather_tensor(DType::f32, {2, 3}, at, storage.data() + span->first);
  EXPECT_EQ(t.to_double(), (std::vector<double>{1, 3, 5, 2, 4, 6}));
  std::vector<uint8_t> big = {0x3f, 0x80, 0, 0};  // 1.0f big-endian
  EXPECT_EQ(gather_tensor(DType::f32, {1}, {"", 0, {1}, true}, big.data()).at(0), 1.0);
  std::vector<uint8_t> mask = {0, 7, 1};
  EXPECT_EQ(gather_tensor(DType::boolean, {3}, {"", 0, {1}, false}, mask.data()).bytes,
            (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(element_span({2, 2}, {"", 0, {1, 0}, false}, 4)->bytes, 8);  // broadcast stride 0
  EXPECT_FALSE(element_span({2}, {"", 0, {-1}, false}, 4));
  EXPECT_FALSE(element_span({int64_t{1} << 40, 2}, {"", 0, {int64_t{1} << 40, 1}, false}, 8));
  EXPECT_EQ(element_span({0, 5}, {"", 8, {5, 1}, false}, 4)->bytes, 0);
}

}  // namespace
}  // namespace attnscope
