// Case ordering (step / layer attributes, else numbers in group paths compared numerically),
// lazy discovery of files with many groups, aliases and element types crafted with the C API,
// and the case model's layout conversion.
#include <gtest/gtest.h>

#include "io_test_util.h"

namespace attnscope::test {
namespace {

std::vector<std::string> case_paths(const std::string& path) {
  auto dump = DumpReader::open(path);
  EXPECT_TRUE(dump.ok()) << dump.error().describe();
  std::vector<std::string> out;
  if (!dump.ok()) return out;
  for (const CaseInfo& c : dump->cases()) out.push_back(c.path);
  return out;
}

TEST(Ordering, numbers_in_group_paths_compare_numerically) {
  const std::string path = data_file("order_names.h5");
  {
    Craft f(path);
    for (const char* g : {"/step_10/layer_1", "/step_2/layer_10", "/step_2/layer_9",
                          "/step_2/layer_09x", "/step_1/layer_0", "/step_2/layer_1"}) {
      f.qkv(g);
    }
  }
  EXPECT_EQ(case_paths(path), (std::vector<std::string>{"/step_1/layer_0", "/step_2/layer_1",
                                                        "/step_2/layer_9", "/step_2/layer_09x",
                                                        "/step_2/layer_10", "/step_10/layer_1"}));
}

TEST(Ordering, step_and_layer_attributes_win_over_names) {
  const std::string path = data_file("order_attributes.h5");
  {
    Craft f(path);
    const struct {
      const char* group;
      int64_t step, layer;
    } cases[] = {{"/a", 3, 0}, {"/b", 1, 5}, {"/c", 1, 2}, {"/d", 2, 0}};
    for (const auto& c : cases) {
      f.qkv(c.group);
      f.int_attr(c.group, "step", c.step);
      f.int_attr(c.group, "layer", c.layer);
    }
    f.qkv("/0_no_attributes");
  }
  EXPECT_EQ(case_paths(path),
            (std::vector<std::string>{"/c", "/b", "/d", "/a", "/0_no_attributes"}));
}

TEST(Ordering, three_thousand_empty_groups_and_one_case_open) {
  const std::string path = data_file("many_groups.h5");
  {
    Craft f(path);
    for (int i = 0; i < 3000; ++i) f.group("/steps/step_" + std::to_string(i));
    f.qkv("/steps/step_1234/case");
  }
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  ASSERT_EQ(dump->cases().size(), 1u);
  EXPECT_EQ(dump->cases()[0].path, "/steps/step_1234/case");
  EXPECT_TRUE(dump->rejected().empty());
}

TEST(Aliases, dout_grad_out_and_attn_bias) {
  const std::string path = data_file("aliases.h5");
  {
    Craft f(path);
    f.qkv("/with_dout");
    f.f32("/with_dout/dout", {1, 2, 3, 4}, 4);
    f.qkv("/with_grad_out");
    f.f32("/with_grad_out/grad_out", {1, 2, 3, 4}, 5);
    f.f32("/with_grad_out/attn_bias", {3, 3}, 6);
  }
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  ASSERT_EQ(dump->cases().size(), 2u);
  const CaseInfo& grad = dump->cases()[1];
  ASSERT_TRUE(grad.has("do") && grad.has("bias"));
  EXPECT_EQ(grad.find("do")->dataset, "grad_out");
  EXPECT_EQ(grad.find("bias")->dataset, "attn_bias");
  auto a = dump->load("/with_dout");
  auto b = dump->load("/with_grad_out");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->find("do")->at(7), pattern(7, 4));
  EXPECT_EQ(b->find("do")->at(7), pattern(7, 5));
  EXPECT_EQ(b->find("bias")->shape, (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(b->find("bias")->at(8), pattern(8, 6));
}

TEST(ElementTypes, h5py_style_bool_int8_mask_bf16_float_and_big_endian_half) {
  const std::string path = data_file("element_types.h5");
  const std::vector<signed char> mask = {0, 1, 1, 1, 0, 1, 1, 1, 0};
  const std::vector<float> values = [] {
    std::vector<float> v(24);
    for (int i = 0; i < 24; ++i) v[static_cast<size_t>(i)] = static_cast<float>(pattern(i, 1));
    return v;
  }();
  {
    Craft f(path);
    const hid_t bool_type = H5Tenum_create(H5T_NATIVE_INT8);
    const signed char no = 0, yes = 1;
    H5Tenum_insert(bool_type, "FALSE", &no);
    H5Tenum_insert(bool_type, "TRUE", &yes);
    const std::vector<signed char> bools = {0, 1, 1, 0, 1, 1, 1, 1, 0};
    // BE half: 1 sign, 5 exponent, 10 mantissa bits, big-endian.
    const hid_t half_be = H5Tcopy(H5T_IEEE_F32BE);
    H5Tset_fields(half_be, 15, 10, 5, 0, 10);
    H5Tset_size(half_be, 2);
    H5Tset_ebias(half_be, 15);
    const hid_t bf16 = H5Tcopy(H5T_IEEE_F32LE);
    H5Tset_fields(bf16, 15, 7, 8, 0, 7);
    H5Tset_size(bf16, 2);
    H5Tset_ebias(bf16, 127);
    f.dataset("/enum_bool/q", half_be, {1, 2, 3, 4}, values.data(), H5T_NATIVE_FLOAT);
    f.dataset("/enum_bool/k", bf16, {1, 2, 3, 4}, values.data(), H5T_NATIVE_FLOAT);
    f.f32("/enum_bool/v", {1, 2, 3, 4}, 3);
    f.dataset("/enum_bool/mask", bool_type, {3, 3}, bools.data());
    f.qkv("/int8_mask");
    f.dataset("/int8_mask/mask", H5T_STD_I8LE, {3, 3}, mask.data(), H5T_NATIVE_SCHAR);
    H5Tclose(bool_type);
    H5Tclose(half_be);
    H5Tclose(bf16);
  }
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  ASSERT_EQ(dump->cases().size(), 2u)
      << (dump->rejected().empty() ? "" : dump->rejected()[0].message);
  auto e = dump->load("/enum_bool");
  ASSERT_TRUE(e.ok()) << e.error().describe();
  EXPECT_EQ(e->find("mask")->dtype, DType::boolean);
  EXPECT_EQ(e->find("mask")->to_mask(), (std::vector<uint8_t>{0, 1, 1, 0, 1, 1, 1, 1, 0}));
  EXPECT_EQ(e->q().dtype, DType::f16);
  EXPECT_EQ(e->k().dtype, DType::bf16);
  for (int64_t i = 0; i < 24; ++i) {
    ASSERT_EQ(e->q().at(i), values[static_cast<size_t>(i)]) << i;
    ASSERT_EQ(e->k().at(i), values[static_cast<size_t>(i)]) << i;
  }
  auto m = dump->load("/int8_mask");
  ASSERT_TRUE(m.ok()) << m.error().describe();
  EXPECT_EQ(m->find("mask")->dtype, DType::u8);
  EXPECT_EQ(m->find("mask")->to_mask(), (std::vector<uint8_t>{0, 1, 1, 1, 0, 1, 1, 1, 0}));
  {  // -1 in a signed mask is refused, read by its real sign (not as 255)
    Craft f(data_file("element_types_neg.h5"));
    const std::vector<signed char> negative = {0, 1, -1, 1, 0, 1, 1, 1, 0};
    f.qkv("/int8_mask");
    f.dataset("/int8_mask/mask", H5T_STD_I8LE, {3, 3}, negative.data(), H5T_NATIVE_SCHAR);
  }
  auto neg = DumpReader::open(data_file("element_types_neg.h5"))->load("/int8_mask");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.error().message.find("holds -1 at [0, 2]"), std::string::npos)
      << neg.error().message;
}

TEST(CaseModel, bshd_conversion_is_a_transpose_and_inverts) {
  HostTensor stored = pattern_tensor(DType::f32, {2, 3, 4, 5}, 1);  // [B, S, H, D]
  const HostTensor canonical = to_canonical("q", stored, Layout::bshd);
  EXPECT_EQ(canonical.shape, (std::vector<int64_t>{2, 4, 3, 5}));
  // canonical [b, h, s, d] == stored [b, s, h, d]
  EXPECT_EQ(canonical.at(((1 * 4 + 2) * 3 + 1) * 5 + 3), stored.at(((1 * 3 + 1) * 4 + 2) * 5 + 3));
  expect_same_tensor(stored, from_canonical("q", canonical, Layout::bshd), "inverse");
  const HostTensor lse = pattern_tensor(DType::f32, {4, 3}, 2);
  EXPECT_EQ(to_canonical("lse", lse, Layout::hsd).shape, (std::vector<int64_t>{1, 4, 3}));
  EXPECT_EQ(to_canonical("mask", mask_tensor(DType::boolean, {3}), Layout::sd).shape,
            (std::vector<int64_t>{1, 1, 1, 3}));
}

TEST(CaseModel, layout_names_parse_case_insensitively) {
  EXPECT_EQ(parse_layout("bshd"), std::optional<Layout>(Layout::bshd));
  EXPECT_EQ(parse_layout("BHSD"), std::optional<Layout>(Layout::bhsd));
  EXPECT_FALSE(parse_layout("HBSD").has_value());
  EXPECT_EQ(layout_for_rank(3, Layout::bshd), Layout::hsd);
  EXPECT_STREQ(canonical_tensor_name("grad_out"), "do");
  EXPECT_EQ(canonical_tensor_name("scores"), nullptr);
}

}  // namespace
}  // namespace attnscope::test
