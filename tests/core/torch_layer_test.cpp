// A layer recorded with LibTorch's CPU flash SDPA in bf16 (core/torch_layer.h): its recorded
// gradients pass the recorded-output check once the replay counts the kernel's roundings of its
// bf16 gradient accumulators (one per block of query rows for dK / dV): one rounding alone
// would call a correct kernel's dK / dV wrong at this length.
#include <gtest/gtest.h>

#include <string>

#include "core/analysis/case_analysis.h"
#include "core/replay.h"
#include "core/torch_layer.h"

namespace attnscope {
namespace {

TEST(TorchLayer, cpu_flash_bf16_gradients_pass_the_recorded_check_with_their_block_roundings) {
  const Result<RecordedLayer> layer = record_torch_layer({1, 32, 8, 1024, 128}, 2, 1);
  ASSERT_TRUE(layer.ok()) << layer.error().describe();
  const Replay replay = replay_of(layer->data.info.config, false);
  ASSERT_TRUE(replay.gradients_accumulate_stored) << replay.text;
  EXPECT_EQ(stored_roundings(replay, "dv", 1024, 1024, 4), 16);  // 4 heads x 4 blocks of 256 rows
  EXPECT_EQ(stored_roundings(replay, "dq", 1024, 1024, 4), 2);   // blocks of 512 keys
  AnalysisSettings settings;
  settings.threads = 2;
  settings.precision_check = false;
  const Result<CaseAnalysis> a = analyze_case(layer->data, settings);
  ASSERT_TRUE(a.ok()) << a.error().describe();
  int beyond_one_rounding = 0;
  for (const RecordedComparison& c : a->recorded) {
    EXPECT_TRUE(c.within_rule) << c.tensor << ": max error " << c.max_error << ", threshold "
                               << c.threshold;
    if (c.tensor == "dk" || c.tensor == "dv") {
      // Elements beyond max(threshold, one bf16 ulp): what one rounding would have flagged.
      beyond_one_rounding += c.max_error > c.threshold;
    }
  }
  EXPECT_EQ(a->recorded.size(), 4u);  // o, dq, dk, dv
  EXPECT_GT(beyond_one_rounding, 0) << "the case no longer needs the block roundings";
  for (const Finding& f : a->findings)
    EXPECT_NE(f.kind, FindingKind::recorded_mismatch) << f.message;
}

}  // namespace
}  // namespace attnscope
