// Safety of the reader: external links, external raw storage and virtual datasets are refused
// unless allowed; link cycles end; impossible or oversized extents are refused before any
// allocation; dumps are never modified by opening and loading.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "io_test_util.h"

namespace attnscope::test {
namespace {

OpenOptions allow_external() {
  OpenOptions o;
  o.allow_external = true;
  return o;
}

// Loads `case_path` and checks that v holds pattern seed 3 (written by Craft::qkv / f32).
void expect_v_loads(const std::string& path, const std::string& case_path,
                    const OpenOptions& options) {
  auto dump = DumpReader::open(path, options);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  auto data = dump->load(case_path);
  ASSERT_TRUE(data.ok()) << data.error().describe();
  const HostTensor& v = data->v();
  ASSERT_EQ(v.numel(), 24);
  for (int64_t i = 0; i < v.numel(); ++i) ASSERT_EQ(v.at(i), pattern(i, 3)) << i;
}

TEST(Safety, external_link_refused_unless_allowed) {
  const std::string target = data_file("ext_target.h5");
  {
    Craft t(target);
    t.f32("/v", {1, 2, 3, 4}, 3);
  }
  const std::string path = data_file("ext_link.h5");
  {
    Craft f(path);
    f.f32("/case/q", {1, 2, 3, 4}, 1);
    f.f32("/case/k", {1, 2, 3, 4}, 2);
    H5Lcreate_external("ext_target.h5", "/v", f.file(), "/case/v", H5P_DEFAULT, H5P_DEFAULT);
  }
  expect_open_error(path, ErrorCode::unsupported, {"/case/v", "ext_target.h5", "external link"});
  expect_v_loads(path, "/case", allow_external());
}

TEST(Safety, external_link_to_group_is_listed_as_rejected) {
  const std::string path = data_file("ext_group_link.h5");
  {
    Craft f(path);
    f.qkv("/case");
    H5Lcreate_external("ext_target.h5", "/", f.file(), "/elsewhere", H5P_DEFAULT, H5P_DEFAULT);
  }
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  ASSERT_EQ(dump->rejected().size(), 1u);
  EXPECT_EQ(dump->rejected()[0].code, ErrorCode::unsupported);
  EXPECT_NE(dump->rejected()[0].message.find("/elsewhere"), std::string::npos);
}

TEST(Safety, external_raw_storage_refused_unless_allowed) {
  const std::string path = data_file("ext_storage.h5");
  std::filesystem::remove(data_file("ext_storage_v.bin"));
  {
    Craft f(path);
    f.f32("/case/q", {1, 2, 3, 4}, 1);
    f.f32("/case/k", {1, 2, 3, 4}, 2);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, "ext_storage_v.bin", 0, 24 * 4);
    const hid_t dapl = H5Pcreate(H5P_DATASET_ACCESS);
    H5Pset_efile_prefix(dapl, data_dir().c_str());
    const hsize_t dims[] = {1, 2, 3, 4};
    const hid_t space = H5Screate_simple(4, dims, nullptr);
    const hid_t d = H5Dcreate2(f.file(), "/case/v", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, dapl);
    std::vector<float> v(24);
    for (int i = 0; i < 24; ++i) v[static_cast<size_t>(i)] = static_cast<float>(pattern(i, 3));
    EXPECT_GE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()), 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Pclose(dapl);
    H5Pclose(dcpl);
  }
  ASSERT_TRUE(std::filesystem::exists(data_file("ext_storage_v.bin")));
  expect_open_error(path, ErrorCode::unsupported, {"/case/v", "external raw storage"});
  expect_v_loads(path, "/case", allow_external());
}

TEST(Safety, virtual_dataset_refused_unless_allowed) {
  const std::string path = data_file("virtual.h5");
  {
    Craft f(path);
    f.f32("/case/q", {1, 2, 3, 4}, 1);
    f.f32("/case/k", {1, 2, 3, 4}, 2);
    f.f32("/sources/v_source", {1, 2, 3, 4}, 3);
    const hsize_t dims[] = {1, 2, 3, 4};
    const hid_t space = H5Screate_simple(4, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_virtual(dcpl, space, ".", "/sources/v_source", space);
    const hid_t d =
        H5Dcreate2(f.file(), "/case/v", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    EXPECT_GE(d, 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(space);
  }
  expect_open_error(path, ErrorCode::unsupported, {"/case/v", "virtual dataset"});
  expect_v_loads(path, "/case", allow_external());
}

TEST(Safety, soft_and_hard_link_cycles_end) {
  const std::string path = data_file("cycles.h5");
  {
    Craft f(path);
    f.qkv("/a/case");
    H5Lcreate_soft("/a", f.file(), "/a/case/back_to_a", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_soft("/loop2", f.file(), "/loop1", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_soft("/loop1", f.file(), "/loop2", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_hard(f.file(), "/a", f.file(), "/a/case/self_parent", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_hard(f.file(), "/", f.file(), "/a/root_again", H5P_DEFAULT, H5P_DEFAULT);
    H5Lcreate_hard(f.file(), "/a/case", f.file(), "/b_same_case", H5P_DEFAULT, H5P_DEFAULT);
  }
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  ASSERT_EQ(dump->cases().size(), 1u) << "a group reached by several links is one case";
  EXPECT_EQ(dump->cases()[0].path, "/a/case");
  EXPECT_TRUE(dump->load("/a/case").ok());
}

TEST(Safety, soft_linked_tensor_is_followed_and_dangling_one_rejected) {
  const std::string path = data_file("soft_tensor.h5");
  {
    Craft f(path);
    f.f32("/shared/keys", {1, 2, 3, 4}, 2);
    f.f32("/case/q", {1, 2, 3, 4}, 1);
    f.f32("/case/v", {1, 2, 3, 4}, 3);
    H5Lcreate_soft("/shared/keys", f.file(), "/case/k", H5P_DEFAULT, H5P_DEFAULT);
    f.qkv("/dangling");
    H5Ldelete(f.file(), "/dangling/k", H5P_DEFAULT);
    H5Lcreate_soft("/nowhere", f.file(), "/dangling/k", H5P_DEFAULT, H5P_DEFAULT);
  }
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  ASSERT_EQ(dump->cases().size(), 1u);
  auto data = dump->load("/case");
  ASSERT_TRUE(data.ok()) << data.error().describe();
  EXPECT_EQ(data->k().at(5), pattern(5, 2));
  ASSERT_EQ(dump->rejected().size(), 1u);
  EXPECT_NE(dump->rejected()[0].message.find("/dangling/k"), std::string::npos);
}

TEST(Safety, dims_overflowing_64_bits_are_refused) {
  const std::string path = data_file("overflow.h5");
  {
    Craft f(path);
    f.f32("/case/k", {1, 2, 3, 4});
    f.f32("/case/v", {1, 2, 3, 4});
    const hsize_t huge = hsize_t{1} << 40;
    const hsize_t chunk[] = {1, 1, 1, 64};
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 4, chunk);
    f.dataset("/case/q", H5T_IEEE_F32LE, {huge, huge, 2, 64}, nullptr, -1, dcpl);
    H5Pclose(dcpl);
  }
  expect_open_error(path, ErrorCode::too_large, {"/case/q", "64 bits"});
}

TEST(Safety, tensor_beyond_max_bytes_is_refused) {
  const std::string path = data_file("too_large.h5");
  {
    Craft f(path);
    f.qkv("/case", 1, 2, 3, 4);
  }
  OpenOptions small;
  small.max_tensor_bytes = 64;
  expect_open_error(path, ErrorCode::too_large, {"/case/q", "96 bytes", "64"}, small);
}

TEST(Safety, open_and_load_leave_the_file_untouched) {
  const std::string path =
      write_one("untouched.h5", "/case", make_case(Sizes{}, DType::f16, Layout::bhsd, true));
  auto bytes = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = bytes();
  const auto mtime = std::filesystem::last_write_time(path);
  std::filesystem::permissions(path, std::filesystem::perms::owner_read,
                               std::filesystem::perm_options::replace);
  {
    auto dump = DumpReader::open(path);
    ASSERT_TRUE(dump.ok()) << dump.error().describe();
    ASSERT_TRUE(dump->load("/case").ok());
  }
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
      std::filesystem::perm_options::replace);
  EXPECT_EQ(std::filesystem::last_write_time(path), mtime);
  EXPECT_TRUE(bytes() == before);
}

TEST(Safety, several_readers_load_concurrently) {
  const std::string path =
      write_one("concurrent.h5", "/case", make_case(Sizes{}, DType::bf16, Layout::bhsd, true));
  auto a = DumpReader::open(path);
  auto b = DumpReader::open(path);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        if (!(t % 2 ? *a : *b).load("/case").ok()) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace attnscope::test
