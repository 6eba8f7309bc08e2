// Pins RecordedFeed, the recorded-output check fed by the streamed fp64 reference: in rounds of
// one (batch, kv group) per worker it judges exactly as the analysis (one round) and as
// compare_recorded over the whole reference, with the baseline given whole or run by the feed
// group by group, and a kv-broadcast batch's dk / dv are judged against the batch's sum.
#include <gtest/gtest.h>

#include "analysis_test_util.h"
#include "core/analysis/recorded_feed.h"
#include "core/replay.h"

namespace attnscope::testing {
namespace {

void expect_same(const RecordedComparison& a, const RecordedComparison& b) {
  SCOPED_TRACE(a.tensor);
  EXPECT_EQ(a.tensor, b.tensor);
  EXPECT_EQ(a.threshold, b.threshold);
  EXPECT_EQ(a.baseline_error, b.baseline_error);
  EXPECT_EQ(a.max_error, b.max_error);
  EXPECT_EQ(a.column_max_error, b.column_max_error);
  EXPECT_EQ(a.within_rule, b.within_rule);
  EXPECT_EQ(a.finite_pairs, b.finite_pairs);
  ASSERT_EQ(a.heads.size(), b.heads.size());
  for (size_t h = 0; h < a.heads.size(); ++h) {
    const HeadComparison &x = a.heads[h], &y = b.heads[h];
    EXPECT_EQ(x.batch, y.batch) << h;
    EXPECT_EQ(x.head, y.head) << h;
    EXPECT_EQ(x.cosine, y.cosine) << h;
    EXPECT_EQ(x.norm_ratio, y.norm_ratio) << h;
    EXPECT_EQ(x.max_error, y.max_error) << h;
    EXPECT_EQ(x.nonfinite_mismatch, y.nonfinite_mismatch) << h;
    EXPECT_EQ(x.bad_row_first, y.bad_row_first) << h;
    EXPECT_EQ(x.bad_row_last, y.bad_row_last) << h;
    EXPECT_EQ(x.within_rule, y.within_rule) << h;
    EXPECT_EQ(x.same_precision_max_error, y.same_precision_max_error) << h;
  }
}

// The sum over the batch of x [B, rest...].
std::vector<double> batch_sum(const std::vector<double>& x, int64_t batch) {
  std::vector<double> sum(x.size() / static_cast<size_t>(batch), 0.0);
  for (size_t e = 0; e < x.size(); ++e) sum[e % sum.size()] += x[e];
  return sum;
}

TEST(RecordedFeed, rounds_of_one_group_judge_as_the_whole_reference) {
  CaseSpec s = spec(4, 2);
  s.batch = 2;
  CaseData c = make_case(s);
  c.info.dims.kv_broadcast = true;  // dk, dv recorded as the sum over the batch
  const Reference64 ref = replay_reference(c);
  std::vector<double> dq = ref.dq;
  for (size_t e = 5 * 128 + 3 * 8; e < 5 * 128 + 4 * 8; ++e) dq[e] *= 3;  // head 5, row 3
  put(c, "o", DType::f16, {2, 4, 16, 8}, ref.o);
  put(c, "lse", DType::f32, {2, 4, 16}, ref.lse);
  put(c, "dq", DType::f16, {2, 4, 16, 8}, dq);
  put(c, "dk", DType::f16, {1, 2, 16, 8}, batch_sum(ref.dk, 2));
  put(c, "dv", DType::f16, {1, 2, 16, 8}, batch_sum(ref.dv, 2));
  const CaseAnalysis a = analyze(c);
  ASSERT_EQ(a.recorded.size(), 5u);
  const ModeRun* fused = a.run(Mode::fused);
  const ModeRun* unfused = a.run(Mode::unfused);
  ASSERT_TRUE(fused != nullptr && unfused != nullptr);

  const Replay replay = replay_of(c.info.config, false);
  Result<CaseInputs> in = make_case_inputs(c, RunChoice{}, InputValues::none);
  ASSERT_TRUE(in.ok());
  RecordedFeed feed(c, in->params, *fused, unfused, replay, /*gradients=*/true, /*threads=*/1);
  // No whole baseline: the feed runs it group by group (GroupBaseline), the same values.
  RecordedFeed by_group(c, in->params, *fused, nullptr, replay, /*gradients=*/true, /*threads=*/2);
  int groups = 0;
  stream_reference64(
      reference_inputs(c, in->params), /*gradients=*/true, /*threads=*/1,
      [&](const GroupReference& g) {
        ++groups;
        feed.add(g);
        by_group.add(g);
      },
      {}, /*round_bytes=*/1);
  EXPECT_EQ(groups, 4);  // B * Hk, one round each
  std::vector<Finding> conventions;
  const std::vector<RecordedComparison> streamed = feed.finish(conventions);
  ASSERT_EQ(streamed.size(), 5u);
  for (size_t t = 0; t < streamed.size(); ++t) expect_same(streamed[t], a.recorded[t]);
  const std::vector<RecordedComparison> grouped = by_group.finish(conventions);
  ASSERT_EQ(grouped.size(), 5u);
  for (size_t t = 0; t < grouped.size(); ++t) expect_same(grouped[t], streamed[t]);

  // o head by head is compare_recorded over the whole reference.
  RecordedComparisonInputs o;
  o.tensor = "o";
  o.geometry = {8, 16, 8, 4};
  o.recorded = values_of(*c.find("o"));
  o.reference = &ref.o;
  o.baseline = values_of(unfused->out.o);
  o.same_precision = values_of(fused->out.o);
  o.stored = Precision::f16;
  o.roundings = stored_roundings(replay, "o", 16, 16, 2);
  expect_same(streamed[0], compare_recorded(o));

  // The wrong dq row is found in head 5 alone; the batch-summed dk, dv have one head per kv head.
  EXPECT_FALSE(streamed[2].within_rule);
  for (const HeadComparison& h : streamed[2].heads) {
    EXPECT_EQ(h.within_rule, !(h.batch == 1 && h.head == 1)) << h.batch << "," << h.head;
  }
  EXPECT_EQ(streamed[2].heads[5].bad_row_first, 3);
  EXPECT_EQ(streamed[2].heads[5].bad_row_last, 3);
  for (const size_t t : {3, 4}) {  // dk, dv: the fp16 rounding of the sum from it
    EXPECT_EQ(streamed[t].heads.size(), 2u);
    EXPECT_TRUE(streamed[t].within_rule);
    EXPECT_LT(streamed[t].max_error, 1e-2) << streamed[t].tensor;
    EXPECT_LT(streamed[t].baseline_error, 1e-2) << streamed[t].tensor;
  }
  EXPECT_TRUE(streamed[0].within_rule && streamed[1].within_rule);
}

}  // namespace
}  // namespace attnscope::testing
