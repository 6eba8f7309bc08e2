// io test helpers: value pattern, case builders, exact comparison and the C-API file crafter.
#include "io_test_util.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>

namespace attnscope::test {

std::string data_dir() {
  static const std::string dir = [] {
    std::filesystem::create_directories(ATTNSCOPE_IO_TEST_DATA);
    return std::string(ATTNSCOPE_IO_TEST_DATA);
  }();
  return dir;
}

std::string data_file(const std::string& name) {
  return data_dir() + "/" + name;
}

double pattern(int64_t i, int seed) {
  return static_cast<double>((i * 37 + seed * 11) % 101 - 50) / 16.0;
}

std::vector<double> pattern_values(int64_t n, int seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = pattern(i, seed);
  return v;
}

HostTensor pattern_tensor(DType dtype, std::vector<int64_t> shape, int seed, bool specials) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v = pattern_values(n, seed);
  if (specials) {
    const double extra[] = {-0.0, std::ldexp(1.0, -24), std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::quiet_NaN()};
    for (size_t i = 0; i < 4 && i < v.size(); ++i) v[i] = extra[i];
  }
  return HostTensor::from_double(dtype, std::move(shape), v);
}

HostTensor mask_tensor(DType dtype, std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i % 3 != 0 ? 1 : 0;
  return HostTensor::from_double(dtype, std::move(shape), v);
}

CaseData make_case(const Sizes& in, DType dtype, Layout layout, bool all) {
  Sizes s = in;
  if (layout == Layout::hsd || layout == Layout::sd) s.b = 1;
  if (layout == Layout::sd) s.h = s.hk = 1;
  CaseData c;
  c.info.config.layout = layout;
  auto put = [&](const char* name, std::vector<int64_t> shape, int seed) {
    c.tensors[name] = pattern_tensor(dtype, std::move(shape), seed, seed == 1);
  };
  put("q", {s.b, s.h, s.sq, s.d}, 1);
  put("k", {s.b, s.hk, s.sk, s.d}, 2);
  put("v", {s.b, s.hk, s.sk, s.dv}, 3);
  if (!all) return c;
  put("do", {s.b, s.h, s.sq, s.dv}, 4);
  put("o", {s.b, s.h, s.sq, s.dv}, 5);
  put("lse", {s.b, s.h, s.sq}, 6);
  put("dq", {s.b, s.h, s.sq, s.d}, 7);
  put("dk", {s.b, s.hk, s.sk, s.d}, 8);
  put("dv", {s.b, s.hk, s.sk, s.dv}, 9);
  put("bias", {1, s.h, s.sq, s.sk}, 10);
  c.tensors["mask"] = mask_tensor(DType::boolean, {s.b, 1, s.sq, s.sk});
  return c;
}

DumpReader open_ok(const std::string& path) {
  Result<DumpReader> dump = DumpReader::open(path);
  EXPECT_TRUE(dump.ok()) << (dump ? "" : dump.error().describe());
  if (!dump) std::abort();
  return std::move(dump).value();
}

void expect_same_tensor(const HostTensor& expected, const HostTensor& actual,
                        const std::string& what) {
  EXPECT_EQ(dtype_name(expected.dtype), std::string(dtype_name(actual.dtype))) << what;
  EXPECT_EQ(expected.shape_string(), actual.shape_string()) << what;
  ASSERT_EQ(expected.bytes.size(), actual.bytes.size()) << what;
  const size_t size = dtype_size(expected.dtype);
  for (size_t i = 0; i < expected.bytes.size(); i += size) {
    if (std::memcmp(&expected.bytes[i], &actual.bytes[i], size) == 0) continue;
    ADD_FAILURE() << what << ": element " << i / size << " differs: expected "
                  << expected.at(static_cast<int64_t>(i / size)) << ", got "
                  << actual.at(static_cast<int64_t>(i / size));
    return;
  }
}

std::string write_one(const std::string& file, const std::string& group, const CaseData& data,
                      const WriteOptions& options) {
  const std::string path = data_file(file);
  auto writer = DumpWriter::create(path, options);
  EXPECT_TRUE(writer.ok()) << (writer.ok() ? "" : writer.error().describe());
  if (!writer.ok()) return path;
  Status s = writer->write_case(group, data);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().describe());
  Status c = writer->close();
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().describe());
  return path;
}

Craft::Craft(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  file_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(file_, 0) << path;
  lcpl_ = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl_, 1);
}

Craft::~Craft() {
  close();
}

void Craft::close() {
  if (lcpl_ >= 0) H5Pclose(lcpl_);
  if (file_ >= 0) H5Fclose(file_);
  lcpl_ = file_ = -1;
}

void Craft::group(const std::string& path) {
  if (H5Lexists(file_, path.c_str(), H5P_DEFAULT) > 0) return;
  const hid_t g = H5Gcreate2(file_, path.c_str(), lcpl_, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(g, 0) << path;
  if (g >= 0) H5Gclose(g);
}

void Craft::dataset(const std::string& path, hid_t type, const std::vector<hsize_t>& dims,
                    const void* data, hid_t memory_type, hid_t dcpl) {
  const hid_t space = dims.empty()
                          ? H5Screate(H5S_SCALAR)
                          : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t d = H5Dcreate2(file_, path.c_str(), type, space, lcpl_, dcpl, H5P_DEFAULT);
  EXPECT_GE(d, 0) << path;
  if (d >= 0 && data != nullptr) {
    EXPECT_GE(
        H5Dwrite(d, memory_type < 0 ? type : memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0)
        << path;
  }
  if (d >= 0) H5Dclose(d);
  H5Sclose(space);
}

void Craft::f32(const std::string& path, const std::vector<hsize_t>& dims, int seed) {
  hsize_t n = 1;
  for (hsize_t d : dims) n *= d;
  std::vector<float> v(n);
  for (hsize_t i = 0; i < n; ++i) v[i] = static_cast<float>(pattern(static_cast<int64_t>(i), seed));
  dataset(path, H5T_IEEE_F32LE, dims, v.data(), H5T_NATIVE_FLOAT);
}

void Craft::qkv(const std::string& group, hsize_t b, hsize_t h, hsize_t s, hsize_t d) {
  f32(group + "/q", {b, h, s, d}, 1);
  f32(group + "/k", {b, h, s, d}, 2);
  f32(group + "/v", {b, h, s, d}, 3);
}

namespace {

void attribute(hid_t file, const std::string& object, const char* name, hid_t type,
               const void* value) {
  const hid_t obj = H5Oopen(file, object.c_str(), H5P_DEFAULT);
  const hid_t space = H5Screate(H5S_SCALAR);
  const hid_t a = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  EXPECT_GE(a, 0) << object << " " << name;
  if (a >= 0) H5Awrite(a, type, value), H5Aclose(a);
  H5Sclose(space);
  H5Oclose(obj);
}

}  // namespace

void Craft::string_attr(const std::string& object, const char* name, const std::string& value) {
  const hid_t type = H5Tcopy(H5T_C_S1);
  H5Tset_size(type, H5T_VARIABLE);
  H5Tset_cset(type, H5T_CSET_UTF8);
  const char* text = value.c_str();
  attribute(file_, object, name, type, &text);
  H5Tclose(type);
}

void Craft::double_attr(const std::string& object, const char* name, double value) {
  attribute(file_, object, name, H5T_NATIVE_DOUBLE, &value);
}

void Craft::int_attr(const std::string& object, const char* name, int64_t value) {
  attribute(file_, object, name, H5T_NATIVE_INT64, &value);
}

void expect_open_error(const std::string& path, ErrorCode code,
                       const std::vector<std::string>& names, const OpenOptions& options) {
  auto r = DumpReader::open(path, options);
  ASSERT_FALSE(r.ok()) << path << " opened, expected " << error_code_name(code);
  const Error& e = r.error();
  EXPECT_EQ(error_code_name(e.code), std::string(error_code_name(code))) << e.describe();
  const std::string file = std::filesystem::path(path).filename().string();
  EXPECT_NE(e.message.find(file), std::string::npos) << e.describe();
  for (const std::string& n : names) {
    EXPECT_NE(e.describe().find(n), std::string::npos) << "'" << n << "' not in: " << e.describe();
  }
  EXPECT_FALSE(e.hint.empty()) << e.describe();
}

}  // namespace attnscope::test
