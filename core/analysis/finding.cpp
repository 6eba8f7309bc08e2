// Names of finding kinds and severities, range merging and report ordering.
#include "core/analysis/finding.h"

#include <algorithm>
#include <tuple>

namespace attnscope {

const char* finding_kind_name(FindingKind kind) {
  switch (kind) {
    case FindingKind::nonfinite_input:
      return "nonfinite_input";
    case FindingKind::score_overflow:
      return "score_overflow";
    case FindingKind::mask_fill_overflow:
      return "mask_fill_overflow";
    case FindingKind::fully_masked_row:
      return "fully_masked_row";
    case FindingKind::masked_nan_leak:
      return "masked_nan_leak";
    case FindingKind::exp_overflow:
      return "exp_overflow";
    case FindingKind::nonfinite_output:
      return "nonfinite_output";
    case FindingKind::nonfinite_gradient:
      return "nonfinite_gradient";
    case FindingKind::gradient_explosion:
      return "gradient_explosion";
    case FindingKind::clip_spreads_nan:
      return "clip_spreads_nan";
    case FindingKind::recorded_mismatch:
      return "recorded_mismatch";
    case FindingKind::precision_loss:
      return "precision_loss";
    case FindingKind::silent_zero_row:
      return "silent_zero_row";
    case FindingKind::replay_inexact:
      return "replay_inexact";
    case FindingKind::recorded_convention:
      return "recorded_convention";
    case FindingKind::cross_sequence_attention:
      return "cross_sequence_attention";
  }
  return "unknown";
}

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::error:
      return "error";
    case Severity::warning:
      return "warning";
    case Severity::info:
      return "info";
  }
  return "unknown";
}

IndexRange IndexRange::merged(const IndexRange& other) const {
  if (!valid()) return other;
  if (!other.valid()) return *this;
  return {std::min(first, other.first), std::max(last, other.last)};
}

bool is_backward_finding(const Finding& f) {
  if (f.kind == FindingKind::nonfinite_gradient || f.kind == FindingKind::gradient_explosion ||
      f.kind == FindingKind::clip_spreads_nan) {
    return true;
  }
  const std::string& t = f.tensor;
  return t == "dO" || t == "dq" || t == "dk" || t == "dv" || t == "dQ" || t == "dK" || t == "dV";
}

bool has_error(const std::vector<Finding>& findings) {
  return count_severity(findings, Severity::error) > 0;
}

int64_t count_severity(const std::vector<Finding>& findings, Severity severity) {
  return std::count_if(findings.begin(), findings.end(),
                       [&](const Finding& f) { return f.severity == severity; });
}

void sort_findings(std::vector<Finding>& findings) {
  std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
    return std::make_tuple(a.severity, is_backward_finding(a), a.kind, a.batch, a.head,
                           a.rows.first) < std::make_tuple(b.severity, is_backward_finding(b),
                                                           b.kind, b.batch, b.head, b.rows.first);
  });
}

}  // namespace attnscope
