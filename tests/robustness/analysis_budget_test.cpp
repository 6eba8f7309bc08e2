// Memory budget inside analyze_case (issue 7): the estimate of what an analysis holds is exact
// for a known shape, and an analysis beyond the budget is refused naming the size and the
// budget.
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
//   runs 2 * (4 * 1024 + 32 * 32) + fp64 8 * (1024 + 3 * 32) = 19200
constexpr int64_t kAnalysisBytes = 19200;

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
}

TEST_F(AnalysisBudget, analysis_beyond_the_budget_is_refused_with_sizes) {
  budget(kAnalysisBytes - 1);
  const Result<CaseAnalysis> a = analyze_case(make_case(spec(2, 2)), AnalysisSettings{});
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, ErrorCode::too_large);
  EXPECT_EQ(a.error().message.rfind("/crafted: analysing the case needs ", 0), 0u)
      << a.error().message;
  EXPECT_NE(a.error().message.find("(19200 bytes), more than the memory budget of "),
            std::string::npos)
      << a.error().message;
  EXPECT_NE(a.error().message.find("(from the test)"), std::string::npos);
  EXPECT_NE(a.error().hint.find("--memory-budget"), std::string::npos);
}

}  // namespace
}  // namespace attnscope
