// A case's verdict for the dump browser's status badge and "next finding": the findings of
// analyze_case with every setting left to the recorded run, exactly what `attnscope-cli scan`
// reports for the case, reduced to the worst severity, counts, kinds and the finding to show
// first. Plain C++, no Qt.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/analysis/finding.h"
#include "core/analysis/first_bad_case.h"
#include "core/case_model.h"

namespace attnscope {

struct CaseVerdict {
  std::optional<Severity> worst;  // none: no finding at all
  int errors = 0, warnings = 0, infos = 0;
  std::vector<FindingKind> kinds;  // distinct, in report order (errors first)
  // The first finding in report order (an error when there is one): where to look first.
  std::optional<Finding> lead;
  // Where the case sits and which side went wrong: what first_bad_case orders a run by
  // (scan_verdict fills it; verdict_of leaves it empty).
  CaseOutcome outcome;
};

// The verdict of findings in report order (sort_findings).
CaseVerdict verdict_of(const std::vector<Finding>& findings);

// "2 errors, 1 warning: score_overflow, nonfinite_output, precision_loss"; "no findings".
std::string verdict_text(const CaseVerdict& verdict);

// The verdict of a case from the findings of its analysis at the recorded run (analyze_case or
// summarize_case with the run choice left empty): what `attnscope-cli scan` reports for it.
// `rank`: the rank of a run folder that recorded the case.
CaseVerdict scan_verdict(const CaseInfo& info, const std::vector<Finding>& findings,
                         std::optional<int64_t> rank = std::nullopt);

}  // namespace attnscope
