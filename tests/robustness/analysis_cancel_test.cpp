// Cancel predicates of the long core analyses (the GUI passes "a newer request exists"):
// analyze_case stops between its phases and inside a kernel run (dropping that run), and
// scale_sweep before and inside each run, returning what they have with `interrupted` set; a
// predicate that never fires changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "core/analysis/case_analysis.h"
#include "core/analysis/reference64.h"
#include "core/analysis/scale_sweep.h"
#include "tests/analysis/analysis_test_util.h"

namespace attnscope {
namespace {

using testing::analyze;
using testing::make_case;
using testing::spec;

TEST(AnalysisCancel, analyze_case_cancelled_before_the_first_run_does_nothing) {
  const CaseData c = make_case(spec(2, 2));
  AnalysisSettings s;
  std::atomic<int> polls{0};
  s.cancelled = [&] {
    ++polls;
    return true;
  };
  const CaseAnalysis a = analyze(c, s);
  EXPECT_TRUE(a.interrupted);
  EXPECT_TRUE(a.runs.empty());
  EXPECT_TRUE(a.findings.empty());
  EXPECT_EQ(polls.load(), 1);
}

// Polls a predicate that never fires receives from analyze_case with settings s: without the
// precision and recorded checks, 1 before each mode run, the kernels' own (one per tile), then
// 3 (after the runs, after the reference block, after the recorded comparison).
int silent_polls(const CaseData& c, AnalysisSettings s) {
  s.precision_check = false;
  s.recorded_check = false;
  std::atomic<int> polls{0};
  s.cancelled = [&] {
    ++polls;
    return false;
  };
  analyze(c, s);
  return polls.load();
}

TEST(AnalysisCancel, analyze_case_cancelled_inside_the_first_kernel_run_keeps_no_run) {
  const CaseData c = make_case(spec(2, 2));
  AnalysisSettings s;  // modes fused, unfused
  std::atomic<int> polls{0};
  s.cancelled = [&] { return ++polls > 1; };  // fires at the kernel's first tile
  const CaseAnalysis a = analyze(c, s);
  EXPECT_TRUE(a.interrupted);
  EXPECT_TRUE(a.runs.empty());
  EXPECT_TRUE(a.stats.runs.empty());
}

TEST(AnalysisCancel, analyze_case_cancelled_inside_the_second_kernel_run_keeps_the_first) {
  const CaseData c = make_case(spec(2, 2));
  AnalysisSettings s;  // modes fused, unfused
  s.threads = 1;
  AnalysisSettings fused_only = s;
  fused_only.run.modes = {Mode::fused};
  const int fused_run = silent_polls(c, fused_only) - 4;  // the fused kernels' polls
  ASSERT_GT(fused_run, 0);
  std::atomic<int> polls{0};
  // 1 before the fused run, its polls, 1 before the unfused run, then its first tile.
  s.cancelled = [&] { return ++polls > fused_run + 3; };
  const CaseAnalysis a = analyze(c, s);
  EXPECT_TRUE(a.interrupted);
  ASSERT_EQ(a.runs.size(), 1u);
  EXPECT_EQ(a.runs[0].mode, Mode::fused);
  EXPECT_TRUE(a.stats.runs.empty());
}

TEST(AnalysisCancel, analyze_case_with_a_silent_predicate_is_unchanged) {
  CaseData c = make_case(spec(4, 2));
  AnalysisSettings s;
  s.run.precision = Precision::f16;
  s.run.clip_norm = 1.0;
  const CaseAnalysis plain = analyze(c, s);
  std::atomic<int> polls{0};
  s.cancelled = [&] {
    ++polls;
    return false;
  };
  const CaseAnalysis polled = analyze(c, s);
  EXPECT_FALSE(polled.interrupted);
  EXPECT_GT(polls.load(), 4);  // phases plus one poll per fp64 reference kv group
  EXPECT_EQ(testing::summary(polled), testing::summary(plain));
  ASSERT_EQ(polled.runs.size(), plain.runs.size());
  for (size_t r = 0; r < plain.runs.size(); ++r) {
    EXPECT_EQ(polled.runs[r].out.o, plain.runs[r].out.o);
    EXPECT_EQ(polled.runs[r].out.dq, plain.runs[r].out.dq);
  }
  ASSERT_EQ(polled.recorded.size(), plain.recorded.size());
  EXPECT_EQ(polled.clips.size(), plain.clips.size());
}

// Once the predicate fires, the streamed fp64 reference hands over no further (batch, kv group)
// and the analysis stops with nothing judged; the groups handed over before are the whole
// reference's.
TEST(AnalysisCancel, the_streamed_reference_hands_over_no_group_after_a_cancel) {
  const CaseData c = make_case(spec(4, 4));
  Result<CaseInputs> in = make_case_inputs(c, RunChoice{});
  ASSERT_TRUE(in.ok());
  const Reference64 whole = compute_reference64(*in, /*gradients=*/true, /*threads=*/1);
  const size_t per_head = static_cast<size_t>(16 * 8);  // Sq * Dv
  std::atomic<bool> fired{false};
  std::vector<int64_t> handed;
  stream_reference64(
      reference_inputs(*in), /*gradients=*/true, /*threads=*/1,
      [&](const GroupReference& g) {
        handed.push_back(g.g);
        EXPECT_TRUE(std::equal(g.o, g.o + per_head, whole.o.begin() + g.g * per_head)) << g.g;
        if (handed.size() == 2) fired = true;
      },
      [&] { return fired.load(); }, /*round_bytes=*/1);
  EXPECT_EQ(handed, (std::vector<int64_t>{0, 1}));

  AnalysisSettings s;
  s.run.modes = {Mode::fused};
  s.threads = 1;
  // Polls: 1 before the run, the kernels' own, 1 after the runs, then the reference's.
  const int before_reference = silent_polls(c, s) - 2;
  std::atomic<int> polls{0};
  s.cancelled = [&] { return ++polls > before_reference + 2; };
  const CaseAnalysis a = analyze(c, s);
  EXPECT_TRUE(a.interrupted);
  EXPECT_TRUE(a.findings.empty());
  EXPECT_TRUE(a.stats.runs.empty());
}

// The sweep's check runs before every run and, inside a run, before every kernel tile: wherever
// it fires, the sweep stops at once and keeps only runs that finished, exactly as a full sweep
// computes them, and no range.
TEST(AnalysisCancel, scale_sweep_stops_at_any_poll_and_keeps_only_whole_runs) {
  const CaseData c = make_case(spec(2, 2));
  SweepSettings s;
  s.points = 9;
  s.threads = 1;
  s.cancelled = [] { return false; };
  const Result<ScaleSweep> full = scale_sweep(c, s);
  ASSERT_TRUE(full.ok());
  EXPECT_FALSE(full->interrupted);
  ASSERT_EQ(full->points.size(), 9u * 3 * 2);
  EXPECT_EQ(full->ranges.size(), 6u);

  size_t kept_before = 0;
  for (const int fire_at : {1, 5, 40, 200}) {
    std::atomic<int> polls{0};
    s.cancelled = [&] { return ++polls > fire_at; };
    const Result<ScaleSweep> sweep = scale_sweep(c, s);
    ASSERT_TRUE(sweep.ok());
    EXPECT_TRUE(sweep->interrupted) << fire_at;
    EXPECT_TRUE(sweep->ranges.empty()) << fire_at;
    const std::vector<SweepPoint>& kept = sweep->points;
    EXPECT_GE(kept.size(), kept_before) << fire_at;
    EXPECT_LT(kept.size(), full->points.size()) << fire_at;
    for (size_t n = 0; n < kept.size(); ++n) {
      const SweepPoint& a = kept[n];
      const SweepPoint& b = full->points[n];
      EXPECT_TRUE(a.scale == b.scale && a.precision == b.precision && a.mode == b.mode &&
                  a.nonfinite_o == b.nonfinite_o && a.nonfinite_lse == b.nonfinite_lse &&
                  a.nonfinite_grad == b.nonfinite_grad && a.max_abs_s == b.max_abs_s)
          << "point " << n << " after " << fire_at << " polls";
    }
    kept_before = kept.size();
  }
  EXPECT_GT(kept_before, 0u);  // 200 polls let some runs finish
}

}  // namespace
}  // namespace attnscope
