// Writer -> reader round trips: every dtype (float16, bfloat16 in both storages, float32,
// float64, bool and uint8 masks) in every layout, GQA, special values, all attributes,
// recorded outputs; compared bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>

#include "core/io/safetensors_writer.h"
#include "io_test_util.h"

namespace attnscope::test {
namespace {

struct GridPoint {
  DType dtype;
  Bf16Storage bf16;
  Layout layout;
  std::string name;
};

// Keeps discovered CTest names stable (gtest would print the struct's bytes).
void PrintTo(const GridPoint& p, std::ostream* out) {
  *out << p.name;
}

class RoundtripGrid : public ::testing::TestWithParam<GridPoint> {};

TEST_P(RoundtripGrid, all_tensors_bit_exact) {
  const GridPoint& p = GetParam();
  const CaseData data = make_case(Sizes{}, p.dtype, p.layout, true);
  WriteOptions options;
  options.bf16 = p.bf16;
  options.deflate_level = p.layout == Layout::bshd ? 0 : 4;
  const std::string path = write_one("grid_" + p.name + ".h5", "/case", data, options);

  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  ASSERT_EQ(dump->cases().size(), 1u);
  EXPECT_TRUE(dump->rejected().empty());
  const CaseInfo& info = dump->cases()[0];
  EXPECT_EQ(info.path, "/case");
  EXPECT_EQ(info.config.layout, p.layout);
  const HostTensor& q = data.q();
  EXPECT_EQ(info.dims.batch, q.shape[0]);
  EXPECT_EQ(info.dims.heads, q.shape[1]);
  EXPECT_EQ(info.dims.kv_heads, data.k().shape[1]);
  EXPECT_EQ(info.dims.seqlen_q, 5);
  EXPECT_EQ(info.dims.seqlen_k, 7);
  EXPECT_EQ(info.dims.head_dim, 8);
  EXPECT_EQ(info.dims.head_dim_v, 6);
  ASSERT_TRUE(info.has("q"));
  EXPECT_EQ(info.find("q")->dtype, p.dtype);
  EXPECT_EQ(info.find("q")->shape, from_canonical("q", q, p.layout).shape);
  EXPECT_EQ(info.tensors.size(), 11u);

  auto loaded = dump->load("/case");
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  ASSERT_EQ(loaded->tensors.size(), data.tensors.size());
  for (const auto& [name, expected] : data.tensors) {
    const HostTensor* got = loaded->find(name);
    ASSERT_NE(got, nullptr) << name;
    expect_same_tensor(expected, *got, p.name + " " + name);
  }
}

std::vector<GridPoint> grid() {
  struct D {
    DType dtype;
    Bf16Storage bf16;
    const char* name;
  };
  const D dtypes[] = {{DType::f16, Bf16Storage::uint16_with_attribute, "f16"},
                      {DType::bf16, Bf16Storage::uint16_with_attribute, "bf16_uint16"},
                      {DType::bf16, Bf16Storage::opaque, "bf16_opaque"},
                      {DType::f32, Bf16Storage::uint16_with_attribute, "f32"},
                      {DType::f64, Bf16Storage::uint16_with_attribute, "f64"}};
  const std::pair<Layout, const char*> layouts[] = {
      {Layout::bhsd, "bhsd"}, {Layout::bshd, "bshd"}, {Layout::hsd, "hsd"}, {Layout::sd, "sd"}};
  std::vector<GridPoint> out;
  for (const D& d : dtypes) {
    for (const auto& [layout, lname] : layouts) {
      out.push_back({d.dtype, d.bf16, layout, std::string(d.name) + "_" + lname});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Roundtrip, RoundtripGrid, ::testing::ValuesIn(grid()),
                         [](const ::testing::TestParamInfo<GridPoint>& info) {
                           return info.param.name;
                         });

TEST(Roundtrip, all_attributes_survive) {
  CaseData data = make_case(Sizes{}, DType::f32, Layout::bhsd, false);
  CaseConfig& c = data.info.config;
  c.scale = 0.3;
  c.causal = true;
  c.causal_align = CausalAlign::bottom_right;
  c.dtype = "bfloat16";
  c.softcap = 30.0;
  c.step = 120;
  c.layer = -3;
  c.name = "layer 7 attention";
  c.description = "naïve ünicode — description";
  const std::string path = write_one("all_attributes.h5", "/train/step_000120/layer_07", data);
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  const CaseConfig& got = dump->cases().at(0).config;
  EXPECT_EQ(dump->cases()[0].path, "/train/step_000120/layer_07");
  ASSERT_TRUE(got.scale.has_value());
  EXPECT_EQ(*got.scale, 0.3);
  EXPECT_TRUE(got.causal);
  EXPECT_EQ(got.causal_align, CausalAlign::bottom_right);
  EXPECT_EQ(got.dtype, "bfloat16");
  EXPECT_EQ(got.layout, Layout::bhsd);
  EXPECT_EQ(got.softcap, 30.0);
  EXPECT_EQ(got.step, std::optional<int64_t>(120));
  EXPECT_EQ(got.layer, std::optional<int64_t>(-3));
  EXPECT_EQ(got.name, c.name);
  EXPECT_EQ(got.description, c.description);
}

TEST(Roundtrip, defaults_when_attributes_absent) {
  const std::string path =
      write_one("defaults.h5", "case", make_case(Sizes{}, DType::f32, Layout::bhsd, false));
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  const CaseConfig& got = dump->cases().at(0).config;
  EXPECT_FALSE(got.scale.has_value());
  EXPECT_DOUBLE_EQ(got.effective_scale(8), 1.0 / std::sqrt(8.0));
  EXPECT_FALSE(got.causal);
  EXPECT_FALSE(got.step.has_value());
  EXPECT_TRUE(got.name.empty());
  EXPECT_TRUE(dump->load("case").ok()) << "load without the leading '/'";
}

TEST(Roundtrip, uint8_mask_keeps_values_and_bias_keeps_inf_and_sentinels) {
  CaseData data = make_case(Sizes{}, DType::f16, Layout::bhsd, false);
  HostTensor mask{DType::u8, {1, 1, 5, 7}, std::vector<uint8_t>(5 * 7)};
  for (size_t i = 0; i < mask.bytes.size(); ++i) mask.bytes[i] = static_cast<uint8_t>(i % 3 != 0);
  std::vector<double> bias(5 * 7);
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = i % 4 == 0 ? -inf : i % 4 == 1 ? -1e9 : 0.5;
  bias[2] = inf;
  data.tensors["mask"] = mask;
  data.tensors["bias"] = HostTensor::from_double(DType::f32, {1, 1, 5, 7}, bias);
  const std::string path = write_one("mask_u8_bias_inf.h5", "/c", data);
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  auto loaded = dump->load("/c");
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  expect_same_tensor(data.tensors["mask"], *loaded->find("mask"), "mask");
  expect_same_tensor(data.tensors["bias"], *loaded->find("bias"), "bias");
  EXPECT_EQ(loaded->find("mask")->at(2), 1.0);
  // A mask value other than 0 / 1 is refused with the value and where it is.
  data.tensors["mask"].bytes[9] = 2;
  const std::string bad = write_one("mask_u8_two.h5", "/c", data);
  auto refused = DumpReader::open(bad)->load("/c");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("/c/mask: holds 2 at [0, 0, 1, 2]"), std::string::npos)
      << refused.error().message;
  EXPECT_EQ(loaded->find("bias")->at(1), -1e9f);
  EXPECT_EQ(loaded->find("bias")->at(0), -inf);
}

TEST(Roundtrip, mqa_single_kv_head) {
  Sizes s;
  s.h = 8;
  s.hk = 1;
  const CaseData data = make_case(s, DType::bf16, Layout::bshd, true);
  const std::string path = write_one("mqa_bshd.h5", "/mqa", data);
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  EXPECT_EQ(dump->cases()[0].dims.kv_heads, 1);
  EXPECT_EQ(dump->cases()[0].dims.heads, 8);
  auto loaded = dump->load("/mqa");
  ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
  for (const auto& [name, t] : data.tensors) expect_same_tensor(t, *loaded->find(name), name);
}

TEST(Roundtrip, regenerating_gives_identical_bytes) {
  CaseData data = make_case(Sizes{2, 4, 2, 64, 64, 32, 32}, DType::f16, Layout::bhsd, true);
  data.info.config.name = "deterministic";
  data.info.config.step = 1;
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  };
  const std::vector<char> first = read(write_one("deterministic.h5", "/a/b", data));
  const std::vector<char> second = read(write_one("deterministic.h5", "/a/b", data));
  EXPECT_FALSE(first.empty());
  EXPECT_TRUE(first == second) << "writer output differs between runs";
}

TEST(Roundtrip, several_cases_in_one_file) {
  const std::string path = data_file("several.h5");
  {
    auto writer = DumpWriter::create(path);
    ASSERT_TRUE(writer.ok()) << writer.error().describe();
    for (int layer = 0; layer < 3; ++layer) {
      CaseData data = make_case(Sizes{}, DType::f32, Layout::bhsd, false);
      data.info.config.layer = layer;
      Status s = writer->write_case("/step_1/layer_" + std::to_string(layer), data);
      ASSERT_TRUE(s.ok()) << s.error().describe();
    }
    Status again = writer->write_case("/step_1/layer_0", make_case({}, DType::f32, {}, false));
    EXPECT_FALSE(again.ok()) << "writing a second case into the same group must fail";
    ASSERT_TRUE(writer->close().ok());
    EXPECT_FALSE(writer->write_case("/x", make_case({}, DType::f32, {}, false)).ok());
  }
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  ASSERT_EQ(dump->cases().size(), 3u);
  EXPECT_EQ(dump->cases()[2].path, "/step_1/layer_2");
}

TEST(Roundtrip, writer_refuses_inconsistent_shapes) {
  CaseData data = make_case(Sizes{}, DType::f32, Layout::bhsd, false);
  data.tensors["k"] = pattern_tensor(DType::f32, {2, 3, 7, 8}, 2);
  auto writer = DumpWriter::create(data_file("refused.h5"));
  ASSERT_TRUE(writer.ok());
  Status s = writer->write_case("/bad", data);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(s.error().message.find("refused.h5"), std::string::npos) << s.error().message;
  CaseData unknown = make_case(Sizes{}, DType::f32, Layout::bhsd, false);
  unknown.tensors["scores"] = pattern_tensor(DType::f32, {1}, 1);
  EXPECT_FALSE(writer->write_case("/unknown", unknown).ok());
}

TEST(Roundtrip, writer_reports_unwritable_path) {
  auto writer = DumpWriter::create(data_file("no_such_dir/x.h5"));
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.error().code, ErrorCode::io);
  EXPECT_NE(writer.error().message.find("no_such_dir/x.h5"), std::string::npos);
}

// write_safetensors (the reproducer's tensors.safetensors) read back by the safetensors reader
// that opens bug-report files: every dtype a case holds, bit-exact, infinities and NaN kept.
TEST(Roundtrip, safetensors_writer_is_read_back_bit_exact) {
  for (DType dtype : {DType::f16, DType::bf16, DType::f32, DType::f64}) {
    const CaseData data = make_case(Sizes{}, dtype, Layout::bhsd, false);
    const HostTensor q = pattern_tensor(dtype, data.q().shape, 3, /*specials=*/true);
    const HostTensor mask = mask_tensor(DType::boolean, {1, 1, 5, 7});
    const std::string path = data_file(std::string("writer_") + dtype_name(dtype) + ".safetensors");
    const Status written =
        write_safetensors(path, {{"q", &q}, {"k", &data.k()}, {"v", &data.v()}, {"mask", &mask}},
                          {{"source", "a\"b"}});
    ASSERT_TRUE(written) << written.error().describe();
    DumpReader dump = open_ok(path);
    ASSERT_EQ(dump.cases().size(), 1u);
    auto loaded = dump.load(dump.cases()[0].path);
    ASSERT_TRUE(loaded.ok()) << loaded.error().describe();
    expect_same_tensor(q, loaded->q(), std::string(dtype_name(dtype)) + " q");
    expect_same_tensor(data.k(), loaded->k(), "k");
    expect_same_tensor(data.v(), loaded->v(), "v");
    ASSERT_NE(loaded->find("mask"), nullptr);
    expect_same_tensor(mask, *loaded->find("mask"), "mask");
  }
}

}  // namespace
}  // namespace attnscope::test
