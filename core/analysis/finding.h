// Findings: diagnoses a user can act on (DESIGN §4), with where they are, how many elements,
// a one-line message carrying the numbers that prove it, and a remedy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope {

enum class Severity : uint8_t { error, warning, info };

// Finding kinds; finding_kind_name gives the DESIGN §4 spelling.
enum class FindingKind : uint8_t {
  nonfinite_input,
  score_overflow,
  mask_fill_overflow,
  fully_masked_row,
  masked_nan_leak,
  exp_overflow,
  nonfinite_output,
  nonfinite_gradient,
  gradient_explosion,
  clip_spreads_nan,
  recorded_mismatch,
  precision_loss,
  silent_zero_row,
};

const char* finding_kind_name(FindingKind kind);
const char* severity_name(Severity severity);

// Inclusive index range; first > last means "not applicable".
struct IndexRange {
  int64_t first = 0, last = -1;
  bool valid() const { return first <= last; }
};

struct Finding {
  FindingKind kind = FindingKind::nonfinite_input;
  Severity severity = Severity::error;
  std::string tensor;  // "q", "S", "dQ", ...
  int64_t batch = -1;  // -1 = all / not applicable
  int64_t head = -1;
  IndexRange rows, cols;
  int64_t count = 0;  // elements / rows concerned
  std::string message;
  std::string remedy;
};

bool has_error(const std::vector<Finding>& findings);

}  // namespace attnscope
