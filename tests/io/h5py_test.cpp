// Dumps written by h5py (h5py_fixture.py, run by CTest as the h5py_files fixture) read with the
// values h5py wrote, and h5py reads DumpWriter output with numpy's types.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "io_test_util.h"

namespace attnscope::test {
namespace {

std::string fixture(const std::string& name) {
  return std::string(ATTNSCOPE_H5PY_DATA) + "/h5py_" + name + ".h5";
}

Result<CaseData> load_only_case(const std::string& name, size_t expected_cases = 1) {
  auto dump = DumpReader::open(fixture(name));
  if (!dump) return dump.error();
  EXPECT_EQ(dump->cases().size(), expected_cases);
  EXPECT_TRUE(dump->rejected().empty());
  return dump->load(dump->cases().at(0).path);
}

// Element [b, h, s, d] of canonical `t` equals pattern(seed) at the stored flat index.
void expect_pattern(const HostTensor& t, int seed, const std::string& what) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    ASSERT_EQ(t.at(i), pattern(i, seed)) << what << " element " << i;
  }
}

TEST(H5py, native_float16_bool_mask_and_string_attributes) {
  auto c = load_only_case("native_f16");
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->q().dtype, DType::f16);
  expect_pattern(c->q(), 1, "q");
  expect_pattern(c->k(), 2, "k");
  expect_pattern(c->v(), 3, "v");
  expect_pattern(*c->find("do"), 4, "do (gzip)");
  const HostTensor& mask = *c->find("mask");
  EXPECT_EQ(mask.dtype, DType::boolean);
  EXPECT_EQ(mask.shape, (std::vector<int64_t>{1, 1, 5, 7}));
  for (int64_t i = 0; i < mask.numel(); ++i) ASSERT_EQ(mask.at(i), i % 3 != 0 ? 1 : 0) << i;
  const CaseInfo& info = c->info;
  EXPECT_EQ(info.dims.kv_heads, 2);
  EXPECT_EQ(info.config.scale, std::optional<double>(0.25));
  EXPECT_TRUE(info.config.causal);
  EXPECT_EQ(info.config.causal_align, CausalAlign::bottom_right);
  EXPECT_EQ(info.config.dtype, "float16");
  EXPECT_EQ(info.config.name, "native half");
  EXPECT_EQ(info.config.description, "naïve — ünicode");
}

TEST(H5py, bfloat16_as_uint16_uint8_mask_and_inf_bias) {
  auto c = load_only_case("bf16");
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->q().dtype, DType::bf16);
  expect_pattern(c->q(), 1, "q");
  expect_pattern(c->v(), 3, "v");
  const HostTensor& mask = *c->find("mask");
  EXPECT_EQ(mask.dtype, DType::u8);
  for (int64_t i = 0; i < 9; ++i) EXPECT_EQ(mask.at(i), i % 3 != 0 ? 1 : 0);
  const HostTensor& bias = *c->find("bias");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(bias.shape, (std::vector<int64_t>{1, 1, 3, 3}));
  EXPECT_EQ(bias.at(0), -inf);
  EXPECT_EQ(bias.at(2), static_cast<double>(-1e9f));
  EXPECT_EQ(bias.at(3), inf);
  EXPECT_FALSE(c->info.config.causal);
  EXPECT_EQ(c->info.config.step, std::optional<int64_t>(7));
  EXPECT_EQ(c->info.config.layer, std::optional<int64_t>(3));
}

TEST(H5py, bshd_fixed_length_layout_attribute_is_transposed) {
  auto c = load_only_case("bshd");
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->info.config.layout, Layout::bshd);
  EXPECT_TRUE(c->info.config.causal) << "integer causal attribute";
  const HostTensor& q = c->q();
  ASSERT_EQ(q.shape, (std::vector<int64_t>{2, 4, 5, 8}));
  // canonical q[b, h, s, d] = stored [b, s, h, d] with stored shape [2, 5, 4, 8]
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t s = 0; s < 5; ++s)
        for (int64_t d = 0; d < 8; ++d) {
          ASSERT_EQ(q.at(((b * 4 + h) * 5 + s) * 8 + d), pattern(((b * 5 + s) * 4 + h) * 8 + d, 1));
        }
  EXPECT_EQ(c->find("o")->shape, (std::vector<int64_t>{2, 4, 5, 8}));
  expect_pattern(*c->find("lse"), 6, "lse");
}

TEST(H5py, three_d_root_case_with_lse) {
  auto c = load_only_case("3d");
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->info.path, "/");
  EXPECT_EQ(c->info.config.layout, Layout::hsd);
  EXPECT_EQ(c->info.config.name, "three-d");
  EXPECT_EQ(c->q().dtype, DType::f64);
  EXPECT_EQ(c->q().shape, (std::vector<int64_t>{1, 4, 5, 8}));
  EXPECT_EQ(c->find("lse")->shape, (std::vector<int64_t>{1, 4, 5}));
  expect_pattern(c->k(), 2, "k");
}

TEST(H5py, two_d_case_with_bool_mask) {
  auto c = load_only_case("2d");
  ASSERT_TRUE(c.ok()) << c.error().describe();
  EXPECT_EQ(c->info.config.layout, Layout::sd);
  EXPECT_EQ(c->q().shape, (std::vector<int64_t>{1, 1, 5, 8}));
  EXPECT_EQ(c->find("mask")->shape, (std::vector<int64_t>{1, 1, 5, 7}));
  expect_pattern(c->v(), 3, "v");
}

TEST(H5py, nested_steps_and_layers_ordered_numerically) {
  auto dump = DumpReader::open(fixture("steps"));
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  std::vector<std::string> expected;
  for (int step : {1, 2, 10}) {
    for (int layer : {0, 1, 9, 10, 11}) {
      expected.push_back("/step_" + std::to_string(step) + "/layer_" + std::to_string(layer));
    }
  }
  std::vector<std::string> got;
  for (const CaseInfo& c : dump->cases()) got.push_back(c.path);
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(dump->cases()[1].config.causal);
  EXPECT_FALSE(dump->cases()[0].config.causal);
  auto c = dump->load("/step_10/layer_9");
  ASSERT_TRUE(c.ok()) << c.error().describe();
  expect_pattern(c->q(), 10, "q");
  expect_pattern(c->k(), 9, "k");
}

TEST(H5py, lzf_filter_is_reported_as_unavailable) {
  expect_open_error(fixture("lzf"), ErrorCode::unsupported, {"/case/q", "lzf"});
}

TEST(H5py, h5py_reads_writer_output_as_numpy_types) {
  CaseData data;
  data.tensors["q"] = pattern_tensor(DType::f16, {1, 2, 3, 4}, 1);
  data.tensors["k"] = pattern_tensor(DType::bf16, {1, 2, 3, 4}, 2);
  data.tensors["v"] = pattern_tensor(DType::f32, {1, 2, 3, 4}, 3);
  data.tensors["mask"] = mask_tensor(DType::boolean, {1, 1, 3, 3});
  data.info.config.causal = true;
  data.info.config.name = "from attnscope";
  data.info.config.scale = 0.125;
  data.info.config.step = 12;
  const std::string path = write_one("for_h5py.h5", "/case", data);
  const std::string command = std::string("\"") + ATTNSCOPE_PYTHON + "\" \"" +
                              ATTNSCOPE_H5PY_FIXTURE + "\" --check \"" + path + "\"";
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
}

}  // namespace
}  // namespace attnscope::test
