// The shared summaries of an open dump (core/view/summary_store.h) on a real sample case: a case
// is analysed once however many threads ask at the same time, every caller gets the same
// summary, the verdict made of it equals the one of analyze_case's findings, a caller's cancel
// while it waits does not cancel the computation, and a computation that fails leaves the work to
// the next caller.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/io/hdf5_dump.h"
#include "core/view/case_verdict.h"
#include "core/view/summary_store.h"

namespace attnscope::test {
namespace {

constexpr const char* kCase = "/train/step_005/layer_00";  // the sample's first NaN

CaseData sampleCase() {
  Result<DumpReader> dump = DumpReader::open(ATTNSCOPE_SAMPLE);
  EXPECT_TRUE(dump.ok()) << dump.error().describe();
  Result<CaseData> data = dump->load(kCase);
  EXPECT_TRUE(data.ok()) << data.error().describe();
  return std::move(data).value();
}

}  // namespace

TEST(SummaryStore, concurrent_callers_share_one_analysis) {
  const CaseData data = sampleCase();
  SummaryStore store;
  std::atomic<int> computed{0};
  const auto compute = [&] {
    ++computed;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // others arrive meanwhile
    SummarySettings s;
    s.threads = 1;
    return summarize_case(data, s);
  };
  std::vector<std::shared_ptr<const CaseSummary>> got(4);
  std::vector<std::thread> callers;
  for (size_t i = 0; i < got.size(); ++i) {
    callers.emplace_back([&, i] {
      Result<std::shared_ptr<const CaseSummary>> r =
          store.get(kCase, compute, [] { return false; });
      ASSERT_TRUE(r.ok()) << r.error().describe();
      got[i] = *r;
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(computed.load(), 1);
  for (const auto& s : got) EXPECT_EQ(s.get(), got[0].get());
  EXPECT_EQ(store.find(kCase).get(), got[0].get());
  EXPECT_EQ(store.find("/train/step_000/layer_00"), nullptr);

  // The verdict made from the shared summary is the scan's.
  const Result<CaseAnalysis> analysed = analyze_case(data, AnalysisSettings{});
  ASSERT_TRUE(analysed.ok());
  const CaseVerdict scanned = scan_verdict(data.info, analysed->findings);
  const CaseVerdict shared = scan_verdict(data.info, got[0]->findings);
  EXPECT_EQ(shared.errors, scanned.errors);
  EXPECT_EQ(shared.warnings, scanned.warnings);
  EXPECT_EQ(shared.kinds, scanned.kinds);
  EXPECT_EQ(shared.outcome.kinds, scanned.outcome.kinds);
  EXPECT_EQ(shared.outcome.nonfinite.size(), scanned.outcome.nonfinite.size());
  EXPECT_GT(shared.errors, 0);  // the sample's NaN case has errors: the comparison means something
}

TEST(SummaryStore, a_waiter_cancelled_leaves_the_computation_running) {
  const CaseData data = sampleCase();
  SummaryStore store;
  std::atomic<bool> started{false}, release{false};
  std::thread first([&] {
    const Result<std::shared_ptr<const CaseSummary>> r = store.get(
        kCase,
        [&] {
          started = true;
          while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(5));
          return summarize_case(data, {});
        },
        [] { return false; });
    EXPECT_TRUE(r.ok());
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::atomic<int> computed{0};
  const Result<std::shared_ptr<const CaseSummary>> waited = store.get(
      kCase,
      [&] {
        ++computed;
        return summarize_case(data, {});
      },
      [] { return true; });
  EXPECT_FALSE(waited.ok());
  EXPECT_NE(waited.error().message.find("cancelled"), std::string::npos);
  release = true;
  first.join();
  EXPECT_EQ(computed.load(), 0);
  EXPECT_NE(store.find(kCase), nullptr);
}

TEST(SummaryStore, a_failed_computation_is_not_stored_and_the_next_caller_computes) {
  const CaseData data = sampleCase();
  SummaryStore store;
  const Result<std::shared_ptr<const CaseSummary>> failed = store.get(
      kCase,
      [] {
        return Result<CaseSummary>(Error{ErrorCode::too_large, "too big", ""});
      },
      [] { return false; });
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().message, "too big");
  EXPECT_EQ(store.find(kCase), nullptr);
  const Result<std::shared_ptr<const CaseSummary>> again = store.get(
      kCase, [&] { return summarize_case(data, {}); }, [] { return false; });
  ASSERT_TRUE(again.ok()) << again.error().describe();
  EXPECT_EQ((*again)->case_path, kCase);
}

}  // namespace attnscope::test
