// CaseCache: one DumpReader::load per case for every consumer, most recently used cases kept,
// walks (Keep::no) served from the cache without filling it, failed reads not kept, one read
// when several threads ask for the same case at once.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "core/io/case_cache.h"
#include "io_test_util.h"

namespace attnscope::test {
namespace {

// A dump with the cases /c0, /c1, /c2 (different q seeds, so their data differ).
std::shared_ptr<const DumpReader> three_cases(const std::string& file) {
  const std::string path = data_file(file);
  {
    auto writer = DumpWriter::create(path);
    EXPECT_TRUE(writer.ok());
    for (int i = 0; i < 3; ++i) {
      CaseData c = make_case(Sizes{}, DType::f32, Layout::bhsd, false);
      HostTensor& q = c.tensors.at("q");
      q = pattern_tensor(DType::f32, q.shape, 10 + i);
      EXPECT_TRUE(writer->write_case("/c" + std::to_string(i), c).ok());
    }
    EXPECT_TRUE(writer->close().ok());
  }
  auto reader = DumpReader::open(path);
  EXPECT_TRUE(reader.ok()) << (reader.ok() ? "" : reader.error().describe());
  return reader.ok() ? std::make_shared<const DumpReader>(std::move(reader).value()) : nullptr;
}

TEST(CaseCache, every_get_of_a_case_shares_one_read) {
  const auto reader = three_cases("case_cache_shared.h5");
  ASSERT_TRUE(reader);
  CaseCache cache(reader);
  auto first = cache.get("/c1");
  auto again = cache.get("c1");  // DumpReader::load's spelling without '/' is the same case
  ASSERT_TRUE(first.ok() && again.ok());
  EXPECT_EQ(first->get(), again->get());
  EXPECT_EQ(reader->loads(), 1u);
  auto direct = reader->load("/c1");
  ASSERT_TRUE(direct.ok());
  expect_same_tensor(direct->q(), (*first)->q(), "cached q");
}

TEST(CaseCache, a_learned_run_is_applied_to_every_case_it_returns_after) {
  const auto reader = three_cases("case_cache_learned.h5");
  ASSERT_TRUE(reader);
  CaseCache cache(reader);
  auto before = cache.get("/c1");
  ASSERT_TRUE(before.ok());
  EXPECT_FALSE((*before)->info.config.run.inferred.any());
  EXPECT_FALSE(cache.learn("/c1", InferredRun{}));  // nothing inferred: nothing learned
  InferredRun run;
  run.mask_fill = MaskFill::safe;
  run.scale = 1.0;
  EXPECT_TRUE(cache.learn("c1", run));
  EXPECT_FALSE(cache.learn("/c1", run));  // known already
  EXPECT_EQ(cache.inferred("/c1").mask_fill, MaskFill::safe);
  for (CaseCache::Keep keep : {CaseCache::Keep::yes, CaseCache::Keep::no}) {
    auto after = cache.get("/c1", keep);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ((*after)->info.config.run.inferred.mask_fill, MaskFill::safe);
    EXPECT_EQ((*after)->info.config.scale, std::optional<double>(1.0));
    EXPECT_EQ((*after)->tensors.at("q").bytes, (*before)->tensors.at("q").bytes);
  }
  EXPECT_EQ(*cache.get("/c1"), *cache.get("/c1"));  // the judged copy is made once
  EXPECT_FALSE((*cache.get("/c0"))->info.config.run.inferred.any());
}

TEST(CaseCache, keeps_the_most_recently_used_cases) {
  const auto reader = three_cases("case_cache_lru.h5");
  ASSERT_TRUE(reader);
  CaseCache cache(reader, 2);
  ASSERT_TRUE(cache.get("/c0").ok());
  ASSERT_TRUE(cache.get("/c1").ok());
  ASSERT_TRUE(cache.get("/c0").ok());  // c0 is now the most recent: c2 pushes out c1
  ASSERT_TRUE(cache.get("/c2").ok());
  EXPECT_EQ(reader->loads(), 3u);
  ASSERT_TRUE(cache.get("/c0").ok());
  EXPECT_EQ(reader->loads(), 3u);
  ASSERT_TRUE(cache.get("/c1").ok());
  EXPECT_EQ(reader->loads(), 4u);
}

TEST(CaseCache, a_walk_reads_uncached_cases_without_pushing_out_the_shown_one) {
  const auto reader = three_cases("case_cache_walk.h5");
  ASSERT_TRUE(reader);
  CaseCache cache(reader, 1);
  auto shown = cache.get("/c0");
  ASSERT_TRUE(shown.ok());
  for (const char* path : {"/c0", "/c1", "/c2"}) {
    auto walked = cache.get(path, CaseCache::Keep::no);
    ASSERT_TRUE(walked.ok()) << path;
  }
  EXPECT_EQ(reader->loads(), 3u);  // c0 from the cache, c1 and c2 read for the walk alone
  auto again = cache.get("/c0");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), shown->get());
  EXPECT_EQ(reader->loads(), 3u);
}

TEST(CaseCache, a_failed_read_is_reported_and_not_kept) {
  const auto reader = three_cases("case_cache_missing.h5");
  ASSERT_TRUE(reader);
  CaseCache cache(reader);
  auto missing = cache.get("/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("nope"), std::string::npos) << missing.error().message;
  EXPECT_FALSE(cache.get("/nope").ok());
  EXPECT_EQ(reader->loads(), 2u);  // read again: an error is not cached
  EXPECT_TRUE(cache.get("/c2").ok());
}

TEST(CaseCache, threads_asking_for_one_case_at_once_read_it_once) {
  const auto reader = three_cases("case_cache_threads.h5");
  ASSERT_TRUE(reader);
  CaseCache cache(reader);
  std::vector<const CaseData*> seen(8, nullptr);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      auto data = cache.get("/c2");
      if (data.ok()) seen[i] = data->get();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(reader->loads(), 1u);
  for (const CaseData* p : seen) EXPECT_EQ(p, seen.front());
  EXPECT_NE(seen.front(), nullptr);
}

}  // namespace
}  // namespace attnscope::test
