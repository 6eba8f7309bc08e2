// Names of finding kinds and severities.
#include "core/analysis/finding.h"

#include <algorithm>

namespace attnscope {

const char* finding_kind_name(FindingKind kind) {
  switch (kind) {
    case FindingKind::nonfinite_input: return "nonfinite_input";
    case FindingKind::score_overflow: return "score_overflow";
    case FindingKind::mask_fill_overflow: return "mask_fill_overflow";
    case FindingKind::fully_masked_row: return "fully_masked_row";
    case FindingKind::masked_nan_leak: return "masked_nan_leak";
    case FindingKind::exp_overflow: return "exp_overflow";
    case FindingKind::nonfinite_output: return "nonfinite_output";
    case FindingKind::nonfinite_gradient: return "nonfinite_gradient";
    case FindingKind::gradient_explosion: return "gradient_explosion";
    case FindingKind::clip_spreads_nan: return "clip_spreads_nan";
    case FindingKind::recorded_mismatch: return "recorded_mismatch";
    case FindingKind::precision_loss: return "precision_loss";
    case FindingKind::silent_zero_row: return "silent_zero_row";
  }
  return "unknown";
}

const char* severity_name(Severity severity) {
  switch (severity) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::info: return "info";
  }
  return "unknown";
}

bool has_error(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::error; });
}

}  // namespace attnscope
