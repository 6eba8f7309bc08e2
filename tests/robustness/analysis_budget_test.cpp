// Memory budget inside analyze_case (issue 7): the estimate of what an analysis holds is exact
// for a known shape, an analysis beyond the budget is refused naming the size and the budget,
// the fp64 naive backward runs as many kv groups at once as the budget leaves room for (same
// values as unlimited), and is skipped with a note when one group does not fit.
#include <gtest/gtest.h>

#include "core/analysis/analysis_memory.h"
#include "core/analysis/case_analysis.h"
#include "core/memory_budget.h"
#include "tests/analysis/analysis_test_util.h"

namespace attnscope {
namespace {

using testing::analyze;
using testing::make_case;
using testing::spec;

// B=1, H=Hk=2, Sq=Sk=16, D=Dv=8: E_q = E_o = E_k = E_v = 256, 32 rows.
//   inputs 8 * 1024 + runs 2 * (4 * 1024 + 32 * 32) + fp64 8 * (1024 + 32) = 26880
//   one kv group: 8 * (4 * 16 * 16 + 16 * (8 + 8 + 16) + 16 * 16) = 14336
constexpr int64_t kAnalysisBytes = 26880;
constexpr int64_t kGroupBytes = 14336;

class AnalysisBudget : public ::testing::Test {
 protected:
  void TearDown() override { clear_memory_budget(); }
  void budget(int64_t bytes) {
    ASSERT_TRUE(set_memory_budget(std::to_string(bytes), "the test").ok());
  }
};

TEST_F(AnalysisBudget, estimates_are_exact_for_a_known_shape) {
  const CaseData c = make_case(spec(2, 2));
  EXPECT_EQ(analysis_bytes(c.info.dims, 0, 2, false), kAnalysisBytes);
  EXPECT_EQ(analysis_bytes(c.info.dims, 0, 2, true), kAnalysisBytes + 16 * 16 * 8);  // one head
  EXPECT_EQ(reference_group_bytes(c.info.dims), kGroupBytes);
  const ReferencePlan three = plan_reference(c.info.dims, true, 8, 3 * kGroupBytes + 5);
  EXPECT_TRUE(three.gradients);
  EXPECT_EQ(three.workers, 3);
  EXPECT_EQ(plan_reference(c.info.dims, true, 2, 100 * kGroupBytes).workers, 2);
  EXPECT_FALSE(plan_reference(c.info.dims, false, 2, 100 * kGroupBytes).gradients);
}

TEST_F(AnalysisBudget, analysis_beyond_the_budget_is_refused_with_sizes) {
  budget(kAnalysisBytes - 1);
  const Result<CaseAnalysis> a = analyze_case(make_case(spec(2, 2)), AnalysisSettings{});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, ErrorCode::too_large);
  EXPECT_EQ(a.error().message.rfind("/crafted: analysing the case needs ", 0), 0u)
      << a.error().message;
  EXPECT_NE(a.error().message.find("(26880 bytes), more than the memory budget of "),
            std::string::npos)
      << a.error().message;
  EXPECT_NE(a.error().message.find("(from the test)"), std::string::npos);
  EXPECT_NE(a.error().hint.find("--memory-budget"), std::string::npos);
}

TEST_F(AnalysisBudget, reference_gradients_skipped_when_one_group_does_not_fit) {
  budget(kAnalysisBytes + kGroupBytes - 1);
  const CaseAnalysis a = analyze(make_case(spec(2, 2)));
  ASSERT_TRUE(a.reference);
  EXPECT_FALSE(a.reference->has_gradients);
  EXPECT_EQ(a.reference->o.size(), 256u);  // the streamed fp64 forward still ran
  EXPECT_EQ(a.reference_note.rfind("fp64 reference gradients skipped: one kv group of the "
                                   "naive backward needs 14 KiB",
                                   0),
            0u)
      << a.reference_note;
  EXPECT_NE(a.reference_note.find("--memory-budget"), std::string::npos);
}

TEST_F(AnalysisBudget, one_group_at_a_time_gives_the_same_gradients) {
  const CaseData c = make_case(spec(4, 2));
  AnalysisSettings s;
  s.threads = 2;
  const CaseAnalysis unlimited = analyze(c, s);
  ASSERT_TRUE(unlimited.reference && unlimited.reference->has_gradients);
  // Room for exactly one kv group of the naive backward beside the rest of the analysis.
  budget(analysis_bytes(c.info.dims, 0, 2, false) + reference_group_bytes(c.info.dims));
  const CaseAnalysis streamed = analyze(c, s);
  ASSERT_TRUE(streamed.reference && streamed.reference->has_gradients);
  EXPECT_TRUE(streamed.reference_note.empty());
  EXPECT_EQ(streamed.reference->dq, unlimited.reference->dq);
  EXPECT_EQ(streamed.reference->dk, unlimited.reference->dk);
  EXPECT_EQ(streamed.reference->dv, unlimited.reference->dv);
}

}  // namespace
}  // namespace attnscope
