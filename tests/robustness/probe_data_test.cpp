// probe_dump on dumps whose metadata is intact but whose data is not (tests/data/bad/chunk_*,
// garbage_deflate_chunk.h5): the probe's test reads turn a libhdf5 crash inside H5Dread into
// an Error naming the file and the dataset, and a failed read into the reader's own message.
#include <gtest/gtest.h>

#include <string>

#include "core/io/dump_probe.h"

namespace attnscope {
namespace {

std::string corpus(const std::string& name) {
  return std::string(ATTNSCOPE_BAD_CORPUS) + "/" + name;
}

Status probe(const std::string& path, int64_t sample_bytes = kProbeSampleBytes) {
  ProbeOptions options;
  options.executable = ATTNSCOPE_PROBE_EXE;
  options.sample_bytes = sample_bytes;
  return probe_dump(path, options);
}

TEST(ProbeData, crash_in_h5dread_names_the_dataset) {
  const std::string path = corpus("chunk_btree_self_loop.h5");
  const Status s = probe(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::format);
  EXPECT_EQ(s.error().message.rfind(path + ": /case/q: the HDF5 library ", 0), 0)
      << s.error().message;
  EXPECT_NE(s.error().message.find("while reading the dataset's data (in attnscope's probe "
                                   "process); attnscope did not open the file"),
            std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().hint.find("re-export it"), std::string::npos) << s.error().hint;
}

TEST(ProbeData, failed_read_is_reported_with_the_readers_message) {
  const std::string path = corpus("garbage_deflate_chunk.h5");
  const Status s = probe(path);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, path +
                                   ": /case/q: cannot read the data (HDF5: inflate() failed) "
                                   "(found by attnscope's probe)");
  EXPECT_NE(s.error().hint.find("re-export the dump"), std::string::npos) << s.error().hint;
}

TEST(ProbeData, sampled_read_still_walks_the_chunk_index) {
  // 64 bytes per read: q (2 KiB) is sampled, not read whole; its second chunk's address lies
  // beyond the end of the file and the index walk or the last-chunk read reports it.
  const std::string path = corpus("chunk_index_beyond_eof.h5");
  const Status s = probe(path, 64);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message.rfind(path + ": /case/q: cannot ", 0), 0) << s.error().message;
}

TEST(ProbeData, intact_metadata_refusal_is_left_to_the_caller) {
  // missing_v.h5 is refused by DumpReader::open in the probe (exit kProbeRefused): Ok here, the
  // caller's own open reports it.
  EXPECT_TRUE(probe(corpus("missing_v.h5")).ok());
}

}  // namespace
}  // namespace attnscope
