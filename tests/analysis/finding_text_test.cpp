// Pins message building blocks (numbers, ranges, head grouping) and the masking analysis.
#include <gtest/gtest.h>

#include <limits>

#include "core/analysis/finding_text.h"
#include "core/analysis/mask_analysis.h"

namespace attnscope {
namespace {

TEST(FindingText, numbers_are_compact_and_prove_the_claim) {
  EXPECT_EQ(num(65504), "65504");
  EXPECT_EQ(num(8.51e5), "8.51e5");
  EXPECT_EQ(num(0.125), "0.125");
  EXPECT_EQ(num(-1e9), "-1e9");
  EXPECT_EQ(num(5.7e-6), "5.7e-6");
  EXPECT_EQ(num(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(count_text(4316), "4,316");
  EXPECT_EQ(range_text("rows", {12, 40}), "rows 12-40");
  EXPECT_EQ(range_text("rows", {3, 3}), "row 3");
}

TEST(FindingText, consecutive_heads_with_equal_rows_group_into_one_finding) {
  std::vector<HeadHit> hits = {{1, 2, {70, 95}, {}, 26, "x"},
                               {1, 0, {70, 95}, {}, 26, "x"},
                               {1, 1, {70, 95}, {}, 26, "x"},
                               {1, 3, {70, 90}, {}, 21, "x"},
                               {0, 0, {70, 95}, {}, 26, "x"}};
  const std::vector<HitGroup> g = group_hits(hits);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].batch, 0);
  EXPECT_EQ(g[1].heads.first, 0);
  EXPECT_EQ(g[1].heads.last, 2);
  EXPECT_EQ(g[1].count, 78);
  EXPECT_EQ(where_text(g[1]), "batch 1, heads 0-2, rows 70-95");
  const Finding f = located(FindingKind::fully_masked_row, Severity::error, "O", g[1]);
  EXPECT_EQ(f.head, -1);
  EXPECT_EQ(f.heads.first, 0);
  EXPECT_EQ(f.heads.last, 2);
  EXPECT_EQ(located(FindingKind::fully_masked_row, Severity::error, "O", g[2]).head, 3);
}

TEST(MaskAnalysis, padding_bias_rows_and_fp16_sentinel_overflow) {
  // bias [1, 1, 4, 4]: keys 2, 3 are padding (-1e9); query row 3 is padding too.
  std::vector<double> bias(16, 0.0);
  for (int i = 0; i < 4; ++i) bias[i * 4 + 2] = bias[i * 4 + 3] = -1e9;
  for (int j = 0; j < 4; ++j) bias[3 * 4 + j] = -1e9;
  AttnParams p;
  p.heads = p.kv_heads = 2;
  p.seqlen_q = p.seqlen_k = 4;
  p.bias = bias.data();
  p.bias_strides = {0, 0, 4, 1};
  p.precision = Precision::f16;
  const MaskInfo m = analyze_masks(p);
  EXPECT_EQ(m.fully_masked_rows, 2);  // row 3 of both heads
  EXPECT_EQ(m.row(0, 1, 3, 2, 4), RowMask::sentinel);
  EXPECT_EQ(m.visible[0], 2);
  ASSERT_EQ(m.bias_overflow.size(), 1u);
  EXPECT_EQ(m.bias_overflow[0].count, 10);
  EXPECT_EQ(m.bias_overflow[0].head, -1);
  p.precision = Precision::bf16;
  EXPECT_TRUE(analyze_masks(p).bias_overflow.empty());
}

TEST(MaskAnalysis, causal_bottom_right_with_more_queries_than_keys_empties_first_rows) {
  AttnParams p;
  p.seqlen_q = 6;
  p.seqlen_k = 4;
  p.causal = true;
  p.causal_align = CausalAlign::bottom_right;
  p.mask_fill = MaskFill::neg_1e9;
  p.precision = Precision::f16;
  const MaskInfo m = analyze_masks(p);
  EXPECT_EQ(m.fully_masked_rows, 2);
  EXPECT_EQ(m.row(0, 0, 1, 1, 6), RowMask::hard);
  EXPECT_EQ(m.visible[5], 4);
  EXPECT_TRUE(m.fill_overflows);
  EXPECT_EQ(m.fill_masked_entries, 4 + 4 + 3 + 2 + 1);
}

}  // namespace
}  // namespace attnscope
