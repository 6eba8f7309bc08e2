// The minimal reproducer's reduction (core/analysis/shrink.h): select_case cuts every tensor
// consistently (GQA groups, broadcast masks, recorded outputs kept only while exact) and
// shrink_case reduces crafted failures to the part that shows them.
#include "core/analysis/shrink.h"

#include <gtest/gtest.h>

#include "analysis_test_util.h"

namespace attnscope {
namespace {

using testing::make_case;
using testing::put;
using testing::values;

// A q row and a k row aligned so that their fp16 product overflows 65504 before scaling.
void plant_overflow(CaseData& c, int64_t b, int64_t h, int64_t row, int64_t key) {
  const CaseDims& d = c.info.dims;
  const int64_t kv = h / (d.heads / d.kv_heads);
  std::vector<double> q = values(c, "q"), k = values(c, "k");
  for (int64_t x = 0; x < d.head_dim; ++x) {
    q[((b * d.heads + h) * d.seqlen_q + row) * d.head_dim + x] = 120;
    k[((b * d.kv_heads + kv) * d.seqlen_k + key) * d.head_dim + x] = 120;
  }
  put(c, "q", DType::f16, c.q().shape, q);
  put(c, "k", DType::f16, c.k().shape, k);
}

ShrinkTarget overflow_on_s() {
  ShrinkTarget t;
  t.kind = FindingKind::score_overflow;
  t.tensor = "S";
  return t;
}

TEST(Shrink, SelectKeepsWholeGqaGroupsAndCutsABroadcastMask) {
  testing::CaseSpec s = testing::spec(4, 2);
  s.batch = 2;
  CaseData c = make_case(s);
  // mask [1, 1, Sq, Sk]: key j visible to row i when (i + j) % 3 != 0.
  std::vector<double> mask(16 * 16);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) mask[i * 16 + j] = (i + j) % 3 != 0;
  }
  put(c, "mask", DType::boolean, {1, 1, 16, 16}, mask);
  put(c, "o", DType::f16, c.q().shape, values(c, "q"));
  put(c, "dk", DType::f16, c.k().shape, values(c, "k"));
  const CaseData cut =
      select_case(c, {{1}, {1}, {2, 5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}});
  EXPECT_EQ(cut.info.dims.batch, 1);
  EXPECT_EQ(cut.info.dims.heads, 2);  // query heads 2 and 3 of kv head 1
  EXPECT_EQ(cut.info.dims.kv_heads, 1);
  EXPECT_EQ(cut.q().shape, (std::vector<int64_t>{1, 2, 2, 8}));
  EXPECT_EQ(cut.k().shape, (std::vector<int64_t>{1, 1, 16, 8}));
  const std::vector<double> q = values(c, "q"), cq = values(cut, "q");
  // cut q[0, 1, 1, 3] is q[1, 3, 5, 3].
  EXPECT_EQ(cq[((0 * 2 + 1) * 2 + 1) * 8 + 3], q[((1 * 4 + 3) * 16 + 5) * 8 + 3]);
  ASSERT_NE(cut.find("mask"), nullptr);
  EXPECT_EQ(cut.find("mask")->shape, (std::vector<int64_t>{1, 1, 2, 16}));
  EXPECT_EQ(cut.find("mask")->at(1 * 16 + 4), 0.0);  // row 5, key 4: (5 + 4) % 3 == 0
  EXPECT_EQ(cut.find("mask")->at(1 * 16 + 2), 1.0);  // row 5, key 2
  EXPECT_EQ(cut.find("mask")->at(0 * 16 + 1), 0.0);  // row 2, key 1
  // o stays (every key kept: a row's output is exact); dk does not (rows were cut).
  EXPECT_NE(cut.find("o"), nullptr);
  EXPECT_EQ(cut.find("dk"), nullptr);
  // Cutting keys of a non-causal case drops o too.
  const CaseData keys_cut = select_case(c, {{0, 1}, {0, 1}, {0, 1}, {3}});
  EXPECT_EQ(keys_cut.find("o"), nullptr);
  EXPECT_EQ(case_elements(keys_cut), keys_cut.q().numel() + keys_cut.k().numel() +
                                         keys_cut.v().numel() + keys_cut.find("do")->numel() +
                                         keys_cut.find("mask")->numel());
}

TEST(Shrink, ScoreOverflowShrinksToItsRowAndKey) {
  testing::CaseSpec s = testing::spec(4, 2);
  s.batch = 3;
  s.seqlen_q = s.seqlen_k = 24;
  CaseData c = make_case(s);
  plant_overflow(c, 2, 3, 17, 9);
  Result<ShrinkResult> r = shrink_case(c, overflow_on_s(), {});
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->kept.batches, (std::vector<int64_t>{2}));
  EXPECT_EQ(r->kept.kv_heads, (std::vector<int64_t>{1}));
  EXPECT_EQ(r->kept.rows, (std::vector<int64_t>{17}));
  EXPECT_EQ(r->kept.keys, (std::vector<int64_t>{9}));
  EXPECT_EQ(r->minimal.info.dims.heads, 2);  // the whole GQA group of head 3
  EXPECT_EQ(r->finding.kind, FindingKind::score_overflow);
  EXPECT_EQ(r->finding.head, 1);  // head 3 is the group's second query head
  EXPECT_LT(r->minimal_elements * 10, r->original_elements);
  EXPECT_FALSE(r->budget_spent);
  // The minimal case shows it again on its own.
  const CaseAnalysis again = testing::analyze(r->minimal);
  EXPECT_TRUE(testing::has_kind(again, FindingKind::score_overflow)) << testing::summary(again);
}

TEST(Shrink, CausalCaseKeepsPrefixesOfRowsAndKeys) {
  testing::CaseSpec s = testing::spec(2, 2);
  s.seqlen_q = s.seqlen_k = 32;
  CaseData c = make_case(s);
  c.info.config.causal = true;
  plant_overflow(c, 0, 1, 20, 11);  // row 20 sees key 11 under the causal mask
  Result<ShrinkResult> r = shrink_case(c, overflow_on_s(), {});
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(r->kept.rows.size(), 21u);  // rows 0..20: the first that sees the pair is 20
  EXPECT_EQ(r->kept.rows.back(), 20);
  EXPECT_EQ(r->kept.keys.size(), 21u);
  EXPECT_TRUE(r->minimal.info.config.causal);
  EXPECT_EQ(r->kept.kv_heads, (std::vector<int64_t>{1}));
}

TEST(Shrink, RefusesATargetTheCaseDoesNotShow) {
  const CaseData c = make_case(testing::spec(2, 2));
  Result<ShrinkResult> r = shrink_case(c, overflow_on_s(), {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::not_found);
  EXPECT_NE(r.error().message.find("score_overflow"), std::string::npos);
  EXPECT_FALSE(reproducible_kind(FindingKind::cross_sequence_attention));
  EXPECT_TRUE(reproducible_kind(FindingKind::masked_nan_leak));
}

}  // namespace
}  // namespace attnscope
