// DumpReader::check_data, the probe's test reads (issue 7): small tensors are read whole, large
// ones only in their first and last chunk (contiguous: first and last elements), so a corrupt
// middle chunk is found with a large sample size and missed with a small one; failures name
// the file, the dataset and the chunk, with a hint.
#include <gtest/gtest.h>

#include <fstream>

#include "io_test_util.h"

namespace attnscope::test {
namespace {

// /case/q float32 [4, 2, 16, 8] in 4 deflated chunks of [1, 2, 16, 8] (1 KiB each raw) and
// contiguous k, v [4, 2, 16, 8]; the deflate stream of chunk `broken` (-1: none) is overwritten
// with bytes that are not deflate.
std::string chunked_dump(const std::string& name, int broken) {
  const std::string path = data_file(name);
  const std::vector<hsize_t> dims = {4, 2, 16, 8}, chunk = {1, 2, 16, 8};
  haddr_t address = 0;
  hsize_t size = 0;
  {
    Craft c(path);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 4, chunk.data());
    H5Pset_deflate(dcpl, 4);
    const std::vector<double> values = pattern_values(4 * 2 * 16 * 8, 1);
    const std::vector<float> q(values.begin(), values.end());
    c.dataset("/case/q", H5T_IEEE_F32LE, dims, q.data(), H5T_NATIVE_FLOAT, dcpl);
    H5Pclose(dcpl);
    c.f32("/case/k", dims, 2);
    c.f32("/case/v", dims, 3);
    if (broken >= 0) {
      const hid_t d = H5Dopen2(c.file(), "/case/q", H5P_DEFAULT);
      const hid_t space = H5Dget_space(d);
      hsize_t offset[4];
      unsigned mask = 0;
      EXPECT_GE(
          H5Dget_chunk_info(d, space, static_cast<hsize_t>(broken), offset, &mask, &address, &size),
          0);
      H5Sclose(space);
      H5Dclose(d);
    }
  }
  if (broken >= 0) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(address));
    for (hsize_t i = 0; i < size; ++i) f.put(static_cast<char>((i * 73 + 41) % 256));
  }
  return path;
}

struct Checked {
  Status status;
  std::vector<std::string> datasets;  // on_dataset calls, in order
};

Checked check(const std::string& path, int64_t sample_bytes) {
  auto dump = DumpReader::open(path);
  EXPECT_TRUE(dump.ok()) << dump.error().describe();
  Checked out{Ok{}, {}};
  out.status =
      dump->check_data(sample_bytes, [&](const std::string& d) { out.datasets.push_back(d); });
  return out;
}

TEST(CheckData, intact_dump_reads_its_chunked_datasets_only) {
  // q chunked and deflated; k, v contiguous: plain byte ranges, no chunk index or filter for
  // libhdf5 to fault on, so only q is test-read.
  const std::string path = chunked_dump("check_intact.h5", -1);
  for (int64_t sample : {int64_t{1} << 20, int64_t{100}}) {
    const Checked c = check(path, sample);
    EXPECT_TRUE(c.status.ok()) << c.status.error().describe();
    EXPECT_EQ(c.datasets, (std::vector<std::string>{"/case/q"})) << sample;
  }
}

TEST(CheckData, whole_read_finds_a_corrupt_middle_chunk) {
  const std::string path = chunked_dump("check_middle.h5", 2);
  const Checked c = check(path, 1 << 20);  // q is 4 KiB: read whole
  ASSERT_FALSE(c.status.ok());
  const Error& e = c.status.error();
  EXPECT_EQ(e.code, ErrorCode::format);
  EXPECT_EQ(e.message.rfind(path + ": /case/q: cannot read the data (HDF5: ", 0), 0) << e.message;
  EXPECT_NE(e.hint.find("re-export the dump"), std::string::npos) << e.hint;
  EXPECT_EQ(c.datasets, std::vector<std::string>{"/case/q"});
}

TEST(CheckData, sampled_read_covers_first_and_last_chunk_only) {
  // 2 KiB per read: one chunk; the corrupt chunk 2 of 0..3 is neither first nor last.
  EXPECT_TRUE(check(chunked_dump("check_middle_sampled.h5", 2), 2048).status.ok());
  const Checked first = check(chunked_dump("check_first.h5", 0), 2048);
  ASSERT_FALSE(first.status.ok());
  EXPECT_NE(first.status.error().message.find("/case/q: cannot read the data (its first chunk)"),
            std::string::npos)
      << first.status.error().message;
  const Checked last = check(chunked_dump("check_last.h5", 3), 2048);
  ASSERT_FALSE(last.status.ok());
  EXPECT_NE(last.status.error().message.find("/case/q: cannot read the data (its last chunk)"),
            std::string::npos)
      << last.status.error().message;
}

TEST(CheckData, sampled_read_of_a_partial_chunk_still_inflates_it) {
  // 100 bytes per read: less than a chunk, yet the whole deflate stream of the last chunk is
  // decoded, so its corruption is found.
  const Checked c = check(chunked_dump("check_last_small.h5", 3), 100);
  ASSERT_FALSE(c.status.ok());
  EXPECT_NE(c.status.error().message.find("(its last chunk)"), std::string::npos)
      << c.status.error().message;
}

}  // namespace
}  // namespace attnscope::test
