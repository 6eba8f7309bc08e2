// Case verdicts (core/view/case_verdict.h) headless: counts, kinds in report order and the lead
// finding of a hand-made list, the one-line text, and scan_verdict on sample cases giving the
// kinds `attnscope-cli scan` reports for them (tests/cli/test_cli_scan.py pins the same).
#include <gtest/gtest.h>

#include <algorithm>

#include "core/analysis/case_analysis.h"
#include "core/io/hdf5_dump.h"
#include "core/view/case_verdict.h"

namespace attnscope::test {
namespace {

Finding finding(FindingKind kind, Severity severity, int64_t head) {
  Finding f;
  f.kind = kind;
  f.severity = severity;
  f.head = head;
  return f;
}

std::vector<std::string> kindNames(const CaseVerdict& v) {
  std::vector<std::string> names;
  for (FindingKind k : v.kinds) names.push_back(finding_kind_name(k));
  std::sort(names.begin(), names.end());
  return names;
}

CaseVerdict scanSampleCase(const std::string& path) {
  const Result<DumpReader> dump = DumpReader::open(ATTNSCOPE_SAMPLE);
  EXPECT_TRUE(dump.ok()) << dump.error().describe();
  const Result<CaseData> data = dump->load(path);
  EXPECT_TRUE(data.ok()) << data.error().describe();
  const Result<CaseAnalysis> a = analyze_case(*data, AnalysisSettings{});
  EXPECT_TRUE(a.ok()) << a.error().describe();
  return scan_verdict(data->info, a->findings);
}

}  // namespace

TEST(CaseVerdict, counts_kinds_and_lead_of_a_finding_list) {
  const CaseVerdict v = verdict_of({finding(FindingKind::score_overflow, Severity::error, 3),
                                    finding(FindingKind::nonfinite_output, Severity::error, 3),
                                    finding(FindingKind::score_overflow, Severity::error, 1),
                                    finding(FindingKind::precision_loss, Severity::warning, 0),
                                    finding(FindingKind::exp_overflow, Severity::info, 3)});
  ASSERT_TRUE(v.worst.has_value());
  EXPECT_EQ(*v.worst, Severity::error);
  EXPECT_EQ(v.errors, 3);
  EXPECT_EQ(v.warnings, 1);
  EXPECT_EQ(v.infos, 1);
  ASSERT_EQ(v.kinds.size(), 4u);
  EXPECT_EQ(v.kinds[0], FindingKind::score_overflow);
  EXPECT_EQ(v.kinds[3], FindingKind::exp_overflow);
  ASSERT_TRUE(v.lead.has_value());
  EXPECT_EQ(v.lead->head, 3);
  EXPECT_EQ(verdict_text(v),
            "3 errors, 1 warning, 1 info: score_overflow, nonfinite_output, precision_loss, "
            "exp_overflow");
}

TEST(CaseVerdict, empty_and_warning_only_lists) {
  const CaseVerdict none = verdict_of({});
  EXPECT_FALSE(none.worst.has_value());
  EXPECT_FALSE(none.lead.has_value());
  EXPECT_EQ(verdict_text(none), "no findings");
  const CaseVerdict warn = verdict_of({finding(FindingKind::precision_loss, Severity::warning, 2)});
  EXPECT_EQ(*warn.worst, Severity::warning);
  EXPECT_EQ(verdict_text(warn), "1 warning: precision_loss");
}

TEST(CaseVerdict, scan_of_sample_cases_matches_the_cli_scan) {
  const CaseVerdict overflow = scanSampleCase("/fp16_score_overflow");
  EXPECT_EQ(kindNames(overflow),
            (std::vector<std::string>{"clip_spreads_nan", "exp_overflow", "nonfinite_gradient",
                                      "nonfinite_output", "score_overflow"}));
  ASSERT_TRUE(overflow.lead.has_value());
  EXPECT_EQ(overflow.lead->kind, FindingKind::score_overflow);  // the forward side first
  EXPECT_EQ(overflow.lead->head, 3);
  EXPECT_EQ(overflow.lead->modes, std::vector<std::string>{"unfused"});

  const CaseVerdict exploding = scanSampleCase("/exploding_grad");
  EXPECT_EQ(kindNames(exploding), std::vector<std::string>{"gradient_explosion"});
  EXPECT_EQ(exploding.errors, 0);
  EXPECT_EQ(exploding.lead->head, 5);

  const CaseVerdict healthy = scanSampleCase("/train/step_000/layer_00");
  EXPECT_FALSE(healthy.worst.has_value()) << verdict_text(healthy);
}

}  // namespace attnscope::test
