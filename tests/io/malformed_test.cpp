// Malformed dumps give clear Result errors naming the file, the dataset and the problem, and
// never crash: non-HDF5 and truncated files, missing tensors, bad ranks and shapes, element
// types that are not numbers, bad attributes, files without cases.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io_test_util.h"

namespace attnscope::test {
namespace {

std::string crafted(const std::string& name) {
  return data_file("bad_" + name + ".h5");
}

TEST(Malformed, missing_file_is_io_error) {
  expect_open_error(data_file("does_not_exist.h5"), ErrorCode::io, {});
}

TEST(Malformed, non_hdf5_file_named_h5) {
  const std::string path = crafted("not_hdf5");
  std::ofstream(path) << "q,k,v\n1,2,3\n";
  expect_open_error(path, ErrorCode::format, {"not an HDF5 file"});
}

TEST(Malformed, truncated_file) {
  const std::string whole =
      write_one("whole.h5", "/case",
                make_case(Sizes{2, 4, 2, 64, 64, 32, 32}, DType::f32, Layout::bhsd, true));
  const std::string path = crafted("truncated");
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_open_error(path, ErrorCode::format, {"truncated"});
}

TEST(Malformed, missing_k) {
  const std::string path = crafted("missing_k");
  {
    Craft f(path);
    f.f32("/case/q", {1, 2, 3, 4});
    f.f32("/case/v", {1, 2, 3, 4});
  }
  expect_open_error(path, ErrorCode::format, {"/case", "'k' is missing"});
}

TEST(Malformed, wrong_rank) {
  const std::string path = crafted("wrong_rank");
  {
    Craft f(path);
    f.f32("/case/q", {1, 1, 2, 3, 4});
    f.f32("/case/k", {1, 1, 2, 3, 4});
    f.f32("/case/v", {1, 1, 2, 3, 4});
  }
  expect_open_error(path, ErrorCode::format, {"/case/q", "rank 5", "[1, 1, 2, 3, 4]"});
}

TEST(Malformed, batch_mismatch) {
  const std::string path = crafted("batch_mismatch");
  {
    Craft f(path);
    f.f32("/case/q", {2, 2, 3, 4});
    f.f32("/case/k", {3, 2, 3, 4});  // batch 1 would be broadcast; 3 against 2 is no batch
    f.f32("/case/v", {3, 2, 3, 4});
  }
  expect_open_error(path, ErrorCode::format, {"/case/k", "batch", "[3, 2, 3, 4]", "[2, 2, 3, 4]"});
}

TEST(Malformed, head_dim_mismatch) {
  const std::string path = crafted("head_dim_mismatch");
  {
    Craft f(path);
    f.f32("/case/q", {1, 2, 3, 4});
    f.f32("/case/k", {1, 2, 3, 5});
    f.f32("/case/v", {1, 2, 3, 4});
  }
  expect_open_error(path, ErrorCode::format, {"/case/k", "head_dim", "[1, 2, 3, 5]"});
}

TEST(Malformed, kv_heads_not_dividing_heads) {
  const std::string path = crafted("kv_heads");
  {
    Craft f(path);
    f.f32("/case/q", {1, 4, 3, 4});
    f.f32("/case/k", {1, 3, 3, 4});
    f.f32("/case/v", {1, 3, 3, 4});
  }
  expect_open_error(path, ErrorCode::format, {"/case/k", "divide", "[1, 3, 3, 4]", "[1, 4, 3, 4]"});
}

TEST(Malformed, mask_not_broadcastable) {
  const std::string path = crafted("mask_shape");
  {
    Craft f(path);
    f.qkv("/case");
    const std::vector<uint8_t> mask(3 * 2, 1);
    f.dataset("/case/mask", H5T_STD_U8LE, {3, 2}, mask.data(), H5T_NATIVE_UINT8);
  }
  expect_open_error(path, ErrorCode::format, {"/case/mask", "[3, 2]", "[1, 2, 3, 3]"});
}

TEST(Malformed, lse_wrong_shape) {
  const std::string path = crafted("lse_shape");
  {
    Craft f(path);
    f.qkv("/case");
    f.f32("/case/lse", {1, 2, 4});
  }
  expect_open_error(path, ErrorCode::format, {"/case/lse", "[1, 2, 4]", "[1, 2, 3]"});
}

TEST(Malformed, string_dataset_as_q) {
  const std::string path = crafted("string_q");
  {
    Craft f(path);
    f.qkv("/case");
    H5Ldelete(f.file(), "/case/q", H5P_DEFAULT);
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, 4);
    f.dataset("/case/q", type, {2}, "abcdefgh");
    H5Tclose(type);
  }
  expect_open_error(path, ErrorCode::format, {"/case/q", "string", "float16/float32"});
}

TEST(Malformed, compound_dataset_as_q) {
  const std::string path = crafted("compound_q");
  {
    Craft f(path);
    f.f32("/case/k", {1, 2, 3, 4});
    f.f32("/case/v", {1, 2, 3, 4});
    const hid_t type = H5Tcreate(H5T_COMPOUND, 8);
    H5Tinsert(type, "re", 0, H5T_NATIVE_FLOAT);
    H5Tinsert(type, "im", 4, H5T_NATIVE_FLOAT);
    f.dataset("/case/q", type, {1, 2, 3, 4}, nullptr);
    H5Tclose(type);
  }
  expect_open_error(path, ErrorCode::format, {"/case/q", "compound"});
}

TEST(Malformed, enum_that_is_not_bool_as_mask) {
  const std::string path = crafted("enum_mask");
  {
    Craft f(path);
    f.qkv("/case");
    const hid_t type = H5Tenum_create(H5T_NATIVE_INT8);
    const signed char red = 0, green = 1, blue = 2;
    H5Tenum_insert(type, "RED", &red);
    H5Tenum_insert(type, "GREEN", &green);
    H5Tenum_insert(type, "BLUE", &blue);
    f.dataset("/case/mask", type, {3, 3}, nullptr);
    H5Tclose(type);
  }
  expect_open_error(path, ErrorCode::format, {"/case/mask", "enum"});
}

TEST(Malformed, variable_length_q) {
  const std::string path = crafted("vlen_q");
  {
    Craft f(path);
    f.f32("/case/k", {1, 2, 3, 4});
    f.f32("/case/v", {1, 2, 3, 4});
    const hid_t type = H5Tvlen_create(H5T_NATIVE_FLOAT);
    f.dataset("/case/q", type, {1, 2, 3, 4}, nullptr);
    H5Tclose(type);
  }
  expect_open_error(path, ErrorCode::format, {"/case/q", "variable-length"});
}

TEST(Malformed, opaque_q_not_tagged_bfloat16) {
  const std::string path = crafted("opaque_q");
  {
    Craft f(path);
    f.f32("/case/k", {1, 2, 3, 4});
    f.f32("/case/v", {1, 2, 3, 4});
    const hid_t type = H5Tcreate(H5T_OPAQUE, 2);
    H5Tset_tag(type, "fp8_e4m3");
    f.dataset("/case/q", type, {1, 2, 3, 4}, nullptr);
    H5Tclose(type);
  }
  expect_open_error(path, ErrorCode::format, {"/case/q", "fp8_e4m3"});
}

TEST(Malformed, integer_q) {
  const std::string path = crafted("integer_q");
  {
    Craft f(path);
    f.f32("/case/k", {1, 2, 3, 4});
    f.f32("/case/v", {1, 2, 3, 4});
    f.dataset("/case/q", H5T_STD_I32LE, {1, 2, 3, 4}, nullptr);
  }
  expect_open_error(path, ErrorCode::format, {"/case/q", "int32", "re-export q"});
}

TEST(Malformed, bf16_tag_on_four_byte_dataset) {
  const std::string path = crafted("bf16_tag_f32");
  {
    Craft f(path);
    f.qkv("/case");
    f.string_attr("/case/k", "dtype", "bfloat16");
  }
  expect_open_error(path, ErrorCode::format, {"/case/k", "4-byte", "bfloat16"});
}

TEST(Malformed, float_mask_points_to_bias) {
  const std::string path = crafted("float_mask");
  {
    Craft f(path);
    f.qkv("/case");
    f.f32("/case/mask", {3, 3});
  }
  expect_open_error(path, ErrorCode::format, {"/case/mask", "float32"});
}

TEST(Malformed, null_dataspace_q) {
  const std::string path = crafted("null_q");
  {
    Craft f(path);
    f.f32("/case/k", {1, 2, 3, 4});
    f.f32("/case/v", {1, 2, 3, 4});
    const hid_t space = H5Screate(H5S_NULL);
    const hid_t d = H5Dcreate2(f.file(), "/case/q", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                               H5P_DEFAULT);
    H5Dclose(d);
    H5Sclose(space);
  }
  expect_open_error(path, ErrorCode::format, {"/case/q", "null dataspace"});
}

TEST(Malformed, bad_layout_attribute) {
  const std::string path = crafted("layout_attr");
  {
    Craft f(path);
    f.qkv("/case");
    f.string_attr("/case", "layout", "HBSD");
  }
  expect_open_error(path, ErrorCode::format, {"/case", "layout", "HBSD"});
}

TEST(Malformed, empty_file_has_no_case) {
  const std::string path = crafted("empty");
  {
    Craft f(path);
    f.group("/step_1/layer_0");
    f.f32("/step_1/other", {4});
  }
  expect_open_error(path, ErrorCode::format, {"no case (group with datasets q, k, v) found"});
}

TEST(Malformed, bad_group_is_rejected_next_to_good_cases) {
  const std::string path = crafted("mixed");
  {
    Craft f(path);
    f.qkv("/good");
    f.f32("/bad/q", {1, 2, 3, 4});
    f.f32("/bad/k", {1, 2, 3, 4});
    f.qkv("/also_good");
  }
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  EXPECT_EQ(dump->cases().size(), 2u);
  ASSERT_EQ(dump->rejected().size(), 1u);
  const Error& e = dump->rejected()[0];
  EXPECT_EQ(e.code, ErrorCode::format);
  EXPECT_NE(e.message.find("bad_mixed.h5: /bad"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("'v'"), std::string::npos) << e.message;
  auto missing = dump->load("/bad");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::not_found);
}

TEST(Malformed, alias_conflict_is_rejected) {
  const std::string path = crafted("alias_conflict");
  {
    Craft f(path);
    f.qkv("/case");
    f.f32("/case/do", {1, 2, 3, 4}, 4);
    f.f32("/case/dout", {1, 2, 3, 4}, 5);
  }
  expect_open_error(path, ErrorCode::format, {"/case/dout", "'do'"});
}

TEST(Malformed, non_finite_scale_and_softcap_are_refused) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const std::pair<const char*, double> cases[] = {
      {"scale", nan}, {"scale", -inf}, {"softcap", inf}};
  for (const auto& [attr, value] : cases) {
    const std::string path = crafted(std::string("nonfinite_") + attr);
    {
      Craft f(path);
      f.qkv("/case");
      f.double_attr("/case", attr, value);
    }
    expect_open_error(path, ErrorCode::format,
                      {"/case", std::string("attribute '") + attr + "' = " + std::to_string(value),
                       "not a finite number"});
  }
}

}  // namespace
}  // namespace attnscope::test
