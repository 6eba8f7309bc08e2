// Memory budget (sizes, origins, refusals naming the size and the budget), atomic DumpWriter
// output (the previous file survives until close(), no temporary left behind, stale
// temporaries of dead writers removed) and the schema version attribute.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/io/atomic_file.h"
#include "core/memory_budget.h"
#include "tests/io/io_test_util.h"

namespace attnscope::test {
namespace {

namespace fs = std::filesystem;

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Files of `dir` whose name starts with '.' (hidden temporaries).
std::vector<std::string> hidden_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name[0] == '.') out.push_back(name);
  }
  return out;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = data_file(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

class BudgetTest : public ::testing::Test {
 protected:
  void TearDown() override {
    clear_memory_budget();
    unsetenv(kMemoryBudgetEnv);
  }
};

TEST_F(BudgetTest, byte_sizes_parse_with_binary_units) {
  EXPECT_EQ(parse_byte_size("1234"), 1234);
  EXPECT_EQ(parse_byte_size("64M"), int64_t{64} << 20);
  EXPECT_EQ(parse_byte_size("8G"), int64_t{8} << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("2kb"), 2048);
  EXPECT_EQ(parse_byte_size("1T"), int64_t{1} << 40);
  for (const char* bad : {"", "abc", "-5M", "0", "12X", "nanG", "1e30G"}) {
    EXPECT_FALSE(parse_byte_size(bad).has_value()) << bad;
  }
  EXPECT_EQ(format_bytes(512), "512 bytes");
  EXPECT_EQ(format_bytes(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(int64_t{64} << 20), "64 MiB");
}

TEST_F(BudgetTest, override_beats_environment_beats_default) {
  EXPECT_NE(memory_budget().origin.find("default (half of"), std::string::npos);
  EXPECT_GT(memory_budget().bytes, 0);
  setenv(kMemoryBudgetEnv, "3M", 1);
  EXPECT_EQ(memory_budget().bytes, int64_t{3} << 20);
  EXPECT_EQ(memory_budget().origin, kMemoryBudgetEnv);
  ASSERT_TRUE(set_memory_budget("5M", "--memory-budget").ok());
  EXPECT_EQ(memory_budget().bytes, int64_t{5} << 20);
  EXPECT_EQ(memory_budget().origin, "--memory-budget");
  const Status bad = set_memory_budget("lots", "--memory-budget");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(bad.error().message.find("'lots' is not a memory size"), std::string::npos);
}

TEST_F(BudgetTest, check_names_size_and_budget) {
  ASSERT_TRUE(set_memory_budget("1M", "--memory-budget").ok());
  EXPECT_TRUE(check_memory("x", int64_t{1} << 20).ok());
  const Status refused = check_memory("S of /case", int64_t{3} << 29);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::too_large);
  EXPECT_EQ(refused.error().message,
            "S of /case needs 1.5 GiB (1610612736 bytes), more than the memory budget of 1 MiB "
            "(from --memory-budget)");
  EXPECT_NE(refused.error().hint.find("--memory-budget"), std::string::npos);
  EXPECT_NE(refused.error().hint.find(kMemoryBudgetEnv), std::string::npos);
}

TEST_F(BudgetTest, full_scores_beyond_budget_are_pooled) {
  CaseDims dims;
  dims.batch = 2;
  dims.heads = 8;
  dims.seqlen_q = 16384;
  dims.seqlen_k = 16384;
  EXPECT_EQ(full_score_bytes(dims), int64_t{2} * 8 * 16384 * 16384 * 17);
  dims.seqlen_q = int64_t{1} << 40;
  dims.seqlen_k = int64_t{1} << 40;
  EXPECT_EQ(full_score_bytes(dims), INT64_MAX);
  ASSERT_TRUE(set_memory_budget("64M", "test").ok());
  EXPECT_EQ(head_matrix_resolution(512, 512), MatrixResolution::full);      // 4.25 MiB
  EXPECT_EQ(head_matrix_resolution(2048, 2048), MatrixResolution::pooled);  // 68 MiB
}

TEST_F(BudgetTest, load_beyond_budget_is_refused_before_reading) {
  const Sizes sizes{1, 2, 2, 64, 64, 16, 16};
  const std::string path =
      write_one("budget_case.h5", "/case", make_case(sizes, DType::f32, Layout::bhsd, false));
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  // q, k, v: 3 x 8 KiB, plus the largest one's read buffer.
  ASSERT_TRUE(set_memory_budget("20000", "--memory-budget").ok());
  const Result<CaseData> refused = dump->load("/case");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::too_large);
  EXPECT_EQ(refused.error().message, path +
                                         ": /case: loading its tensors needs 32 KiB (32768 "
                                         "bytes), more than the memory budget of 20 KiB (from "
                                         "--memory-budget)");
  ASSERT_TRUE(set_memory_budget("32K", "--memory-budget").ok());
  EXPECT_TRUE(dump->load("/case").ok());
}

TEST(AtomicWrite, previous_file_survives_until_close) {
  const std::string dir = fresh_dir("atomic_close");
  const std::string path = dir + "/out.h5";
  std::ofstream(path) << "previous results";
  auto writer = DumpWriter::create(path);
  ASSERT_TRUE(writer.ok()) << writer.error().describe();
  ASSERT_TRUE(writer->write_case("/case", make_case({}, DType::f32, Layout::bhsd, false)).ok());
  EXPECT_EQ(contents(path), "previous results");
  ASSERT_EQ(hidden_files(dir).size(), 1u);
  EXPECT_EQ(hidden_files(dir)[0].rfind(".out.h5.", 0), 0u);
  ASSERT_TRUE(writer->close().ok());
  EXPECT_TRUE(hidden_files(dir).empty());
  auto dump = DumpReader::open(path);
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  EXPECT_EQ(dump->cases().size(), 1u);
}

TEST(AtomicWrite, abandoned_writer_leaves_previous_file_and_no_temporary) {
  const std::string dir = fresh_dir("atomic_abandon");
  const std::string path = dir + "/out.h5";
  std::ofstream(path) << "previous results";
  {
    auto writer = DumpWriter::create(path);
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(writer->write_case("/case", make_case({}, DType::f16, Layout::bhsd, true)).ok());
  }
  EXPECT_EQ(contents(path), "previous results");
  EXPECT_TRUE(hidden_files(dir).empty());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(AtomicWrite, stale_temporary_of_a_dead_writer_is_removed) {
  const std::string dir = fresh_dir("atomic_stale");
  const std::string path = dir + "/out.h5";
  const pid_t child = fork();
  if (child == 0) {
    auto temp = AtomicFile::create(path);
    _exit(temp.ok() ? 0 : 1);  // no destructor: the temporary stays, as after SIGKILL
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const std::vector<std::string> left = hidden_files(dir);
  ASSERT_EQ(left.size(), 1u);
  const std::string prefix = ".out.h5." + std::to_string(child) + "-";
  EXPECT_EQ(left[0].rfind(prefix, 0), 0u) << left[0];
  EXPECT_EQ(left[0].substr(left[0].size() - 4), ".tmp");
  const std::string mine =
      write_one("atomic_stale/out.h5", "/case", make_case({}, DType::f32, Layout::bhsd, false));
  EXPECT_EQ(mine, path);
  EXPECT_TRUE(hidden_files(dir).empty());
}

TEST(SchemaVersion, writer_stamps_version_reader_accepts_older_and_newer) {
  const std::string written =
      write_one("versioned.h5", "/case", make_case({}, DType::f32, Layout::bhsd, false));
  auto dump = DumpReader::open(written);
  ASSERT_TRUE(dump.ok());
  EXPECT_EQ(dump->schema_version(), kSchemaVersion);

  const std::string unversioned = data_file("unversioned.h5");
  const std::string future = data_file("future_version.h5");
  {
    Craft a(unversioned);
    a.qkv("/case");
    Craft b(future);
    b.qkv("/case");
    b.int_attr("/", kSchemaVersionAttribute, 7);
  }
  auto old_file = DumpReader::open(unversioned);
  ASSERT_TRUE(old_file.ok()) << old_file.error().describe();
  EXPECT_EQ(old_file->schema_version(), 0);
  ASSERT_TRUE(old_file->load("/case").ok());
  auto new_file = DumpReader::open(future);
  ASSERT_TRUE(new_file.ok()) << new_file.error().describe();
  EXPECT_EQ(new_file->schema_version(), 7);
  EXPECT_TRUE(new_file->load("/case").ok());
}

TEST(OpenImage, memory_image_reads_like_the_file) {
  const std::string path =
      write_one("image.h5", "/case", make_case({}, DType::bf16, Layout::bhsd, true));
  const std::string bytes = contents(path);
  auto dump = DumpReader::open_image(bytes.data(), bytes.size(), "image.h5");
  ASSERT_TRUE(dump.ok()) << dump.error().describe();
  auto from_file = DumpReader::open(path);
  ASSERT_TRUE(from_file.ok());
  auto a = dump->load("/case");
  auto b = from_file->load("/case");
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& [name, t] : b->tensors) expect_same_tensor(t, a->tensors.at(name), name);
  auto bad = DumpReader::open_image(bytes.data(), bytes.size() / 3, "cut.h5");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message.rfind("cut.h5: not a readable HDF5 file", 0), 0u);
  auto none = DumpReader::open_image("text", 4, "text.h5");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no HDF5 signature"), std::string::npos);
}

}  // namespace
}  // namespace attnscope::test
