// The probe on dumps whose metadata is intact but whose data is not: whole-file corpus files
// (tests/data/bad/chunk_*, garbage_deflate_chunk.h5) are refused with the dataset named, and
// files with one or two broken cases among good ones (tests/data/broken_case_dumps.py) open
// with the broken cases listed and never loaded; a libhdf5 crash inside H5Dread costs one
// probe rerun per crashing case.
#include <gtest/gtest.h>

#include <string>

#include "core/io/dump_probe.h"

namespace attnscope {
namespace {

// How a probe killed inside libhdf5 is reported: by its signal, or, in the ASan build
// (scripts/sanitize.sh), by the exit status of the sanitizer that caught the fault first.
// gcc says __SANITIZE_ADDRESS__, clang __has_feature(address_sanitizer).
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTNSCOPE_TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(ATTNSCOPE_TEST_ASAN)
const std::string kDied = "failed abnormally (probe exit status ";
#else
const std::string kDied = "crashed (signal ";
#endif

std::string corpus(const std::string& name) {
  return std::string(ATTNSCOPE_BAD_CORPUS) + "/" + name;
}

std::string broken_dump(const std::string& name) {
  return std::string(ATTNSCOPE_BROKEN_DUMPS) + "/" + name;
}

ProbeOptions probe_options(int64_t sample_bytes = kProbeSampleBytes) {
  ProbeOptions options;
  options.executable = ATTNSCOPE_PROBE_EXE;
  options.sample_bytes = sample_bytes;
  return options;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

TEST(ProbeData, crash_in_h5dread_names_the_dataset) {
  const std::string path = corpus("chunk_btree_self_loop.h5");
  const Result<DumpReader> dump = open_untrusted_dump(path, probe_options());
  ASSERT_FALSE(dump.ok());
  EXPECT_EQ(dump.error().code, ErrorCode::format);
  EXPECT_TRUE(starts_with(dump.error().message, path + ": /case/q: the HDF5 library " + kDied))
      << dump.error().message;
  EXPECT_NE(dump.error().message.find("while reading the dataset's data (in attnscope's probe "
                                      "process)"),
            std::string::npos)
      << dump.error().message;
  EXPECT_NE(dump.error().hint.find("re-export it"), std::string::npos) << dump.error().hint;
}

TEST(ProbeData, failed_read_is_reported_with_the_readers_message) {
  const std::string path = corpus("garbage_deflate_chunk.h5");
  const Result<DumpReader> dump = open_untrusted_dump(path, probe_options());
  ASSERT_FALSE(dump.ok());
  EXPECT_EQ(dump.error().message, path +
                                      ": /case/q: cannot read the data (HDF5: inflate() failed) "
                                      "(found by attnscope's probe)");
  EXPECT_NE(dump.error().hint.find("re-export the dump"), std::string::npos) << dump.error().hint;
}

TEST(ProbeData, sampled_read_still_walks_the_chunk_index) {
  // 64 bytes per read: q (2 KiB) is sampled, not read whole; its second chunk's address lies
  // beyond the end of the file and the index walk or the last-chunk read reports it.
  const std::string path = corpus("chunk_index_beyond_eof.h5");
  const Result<ProbeOutcome> probed = probe_dump(path, probe_options(64));
  ASSERT_TRUE(probed.ok()) << probed.error().message;
  ASSERT_TRUE(probed->listing);
  EXPECT_TRUE(probed->listing->cases.empty());
  ASSERT_EQ(probed->listing->broken.size(), 1u);
  EXPECT_EQ(probed->listing->broken[0].info.path, "/case");
  EXPECT_TRUE(starts_with(probed->listing->broken[0].error.message, path + ": /case/q: cannot "))
      << probed->listing->broken[0].error.message;
}

TEST(ProbeData, intact_metadata_refusal_is_left_to_the_caller) {
  // missing_v.h5 is refused by DumpReader::open in the probe (exit kProbeRefused): no listing,
  // the caller's own open reports it.
  const Result<ProbeOutcome> probed = probe_dump(corpus("missing_v.h5"), probe_options());
  ASSERT_TRUE(probed.ok());
  EXPECT_FALSE(probed->listing);
  EXPECT_EQ(probed->runs, 1);
}

TEST(ProbeData, one_crashing_case_is_broken_and_the_rest_open) {
  const std::string path = broken_dump("one_crashing_case.h5");
  const Result<ProbeOutcome> probed = probe_dump(path, probe_options());
  ASSERT_TRUE(probed.ok()) << probed.error().message;
  EXPECT_EQ(probed->runs, 2);  // the crash, then the rerun skipping /step_2
  const Result<DumpReader> dump = open_untrusted_dump(path, probe_options());
  ASSERT_TRUE(dump.ok()) << dump.error().message;
  ASSERT_EQ(dump->cases().size(), 3u);
  EXPECT_EQ(dump->cases()[0].path, "/step_0");
  EXPECT_EQ(dump->cases()[1].path, "/step_1");
  EXPECT_EQ(dump->cases()[2].path, "/step_3");
  ASSERT_EQ(dump->broken().size(), 1u);
  const BrokenCase& broken = dump->broken()[0];
  EXPECT_EQ(broken.info.path, "/step_2");
  EXPECT_EQ(broken.info.dims.seqlen_q, 16);
  EXPECT_TRUE(starts_with(broken.error.message, path + ": /step_2/q: the HDF5 library " + kDied))
      << broken.error.message;
  EXPECT_NE(broken.error.message.find("attnscope does not load this case"), std::string::npos);
  // The broken case is never read in this process; the others load.
  const Result<CaseData> refused = dump->load("/step_2");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, broken.error.message);
  const Result<CaseData> good = dump->load("/step_3");
  ASSERT_TRUE(good.ok()) << good.error().message;
  EXPECT_EQ(good->q().shape, (std::vector<int64_t>{1, 2, 16, 8}));
}

TEST(ProbeData, one_unreadable_case_is_broken_without_a_rerun) {
  const std::string path = broken_dump("one_unreadable_case.h5");
  const Result<ProbeOutcome> probed = probe_dump(path, probe_options());
  ASSERT_TRUE(probed.ok()) << probed.error().message;
  EXPECT_EQ(probed->runs, 1);
  ASSERT_TRUE(probed->listing);
  EXPECT_EQ(probed->listing->cases.size(), 3u);
  ASSERT_EQ(probed->listing->broken.size(), 1u);
  EXPECT_EQ(probed->listing->broken[0].info.path, "/step_2");
  EXPECT_EQ(probed->listing->broken[0].error.message,
            path +
                ": /step_2/q: cannot read the data (HDF5: inflate() failed) (found by "
                "attnscope's probe)");
}

TEST(ProbeData, two_crashing_cases_take_three_runs) {
  const std::string path = broken_dump("two_crashing_cases.h5");
  const Result<ProbeOutcome> probed = probe_dump(path, probe_options());
  ASSERT_TRUE(probed.ok()) << probed.error().message;
  EXPECT_EQ(probed->runs, 3);
  ASSERT_TRUE(probed->listing);
  ASSERT_EQ(probed->listing->broken.size(), 2u);
  EXPECT_EQ(probed->listing->broken[0].info.path, "/step_1");
  EXPECT_EQ(probed->listing->broken[1].info.path, "/step_2");
  EXPECT_TRUE(starts_with(probed->listing->broken[1].error.message, path + ": /step_2/q: "))
      << probed->listing->broken[1].error.message;
  ASSERT_EQ(probed->listing->cases.size(), 2u);
  EXPECT_EQ(probed->listing->cases[1].path, "/step_3");
}

TEST(ProbeData, listing_larger_than_a_pipe_buffer_arrives_whole) {
  // 1500 cases: about 400 KB of progress lines and listing, several times the pipe's buffer.
  const std::string path = broken_dump("many_cases.h5");
  for (int run = 0; run < 3; ++run) {
    const Result<ProbeOutcome> probed = probe_dump(path, probe_options());
    ASSERT_TRUE(probed.ok()) << probed.error().message;
    ASSERT_TRUE(probed->listing);
    ASSERT_EQ(probed->listing->cases.size(), 1500u);
    EXPECT_EQ(probed->listing->cases[1499].path, "/many/case_01499");
    EXPECT_TRUE(probed->listing->broken.empty());
  }
}

}  // namespace
}  // namespace attnscope
