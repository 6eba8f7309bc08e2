// Verdicts of scanned cases (see case_verdict.h).
#include "core/view/case_verdict.h"

#include <algorithm>

#include "core/analysis/case_analysis.h"

namespace attnscope {

CaseVerdict verdict_of(const std::vector<Finding>& findings) {
  CaseVerdict v;
  for (const Finding& f : findings) {
    if (!v.worst || f.severity < *v.worst) v.worst = f.severity;
    (f.severity == Severity::error     ? v.errors
     : f.severity == Severity::warning ? v.warnings
                                       : v.infos)++;
    if (std::find(v.kinds.begin(), v.kinds.end(), f.kind) == v.kinds.end()) {
      v.kinds.push_back(f.kind);
    }
  }
  if (!findings.empty()) v.lead = findings.front();
  return v;
}

std::string verdict_text(const CaseVerdict& v) {
  if (!v.worst) return "no findings";
  std::string text;
  auto count = [&text](int n, const char* one, const char* many) {
    if (n == 0) return;
    if (!text.empty()) text += ", ";
    text += std::to_string(n) + " " + (n == 1 ? one : many);
  };
  count(v.errors, "error", "errors");
  count(v.warnings, "warning", "warnings");
  count(v.infos, "info", "info");
  text += ":";
  for (size_t i = 0; i < v.kinds.size(); ++i) {
    text += (i == 0 ? " " : ", ") + std::string(finding_kind_name(v.kinds[i]));
  }
  return text;
}

CaseVerdict scan_verdict(const CaseInfo& info, const std::vector<Finding>& findings,
                         std::optional<int64_t> rank) {
  CaseVerdict v = verdict_of(findings);
  v.outcome = outcome_of(info, findings, rank);
  return v;
}

}  // namespace attnscope
