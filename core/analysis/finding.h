// Findings: diagnoses a user can act on (DESIGN §4), with where they are, how many elements,
// a one-line message carrying the numbers that prove it, a remedy, and the runs it was seen in.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope {

// Ordered from most to least severe (a smaller value is worse).
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
  // The recorded run cannot be replayed exactly (dropout without its keep-mask): which checks
  // were left out.
  replay_inexact,
  // A recorded tensor follows another convention than schema 1 expects (LSE in base 2 or in
  // another layout, a mask of the opposite polarity) and matches once read that way.
  recorded_convention,
  // A packed sequence's queries attend keys of other sequences (the block-diagonal mask leaks).
  cross_sequence_attention,
};

inline constexpr FindingKind kAllFindingKinds[] = {
    FindingKind::nonfinite_input,     FindingKind::score_overflow,
    FindingKind::mask_fill_overflow,  FindingKind::fully_masked_row,
    FindingKind::masked_nan_leak,     FindingKind::exp_overflow,
    FindingKind::nonfinite_output,    FindingKind::nonfinite_gradient,
    FindingKind::gradient_explosion,  FindingKind::clip_spreads_nan,
    FindingKind::recorded_mismatch,   FindingKind::precision_loss,
    FindingKind::silent_zero_row,     FindingKind::replay_inexact,
    FindingKind::recorded_convention, FindingKind::cross_sequence_attention};

const char* finding_kind_name(FindingKind kind);
const char* severity_name(Severity severity);

// Inclusive index range; first > last means "not applicable".
struct IndexRange {
  int64_t first = 0, last = -1;
  bool valid() const { return first <= last; }
  // Smallest range holding both (an invalid side is ignored).
  IndexRange merged(const IndexRange& other) const;
};

// One place a finding was seen: a batch and one head or a run of heads.
struct FindingLocation {
  int64_t batch = -1, head = -1;  // -1 = all / several / not applicable, as in Finding
  IndexRange heads, rows, cols;
  int64_t count = 0;
};

struct Finding {
  FindingKind kind = FindingKind::nonfinite_input;
  Severity severity = Severity::error;
  std::string tensor;  // "q", "S", "dQ", ...
  int64_t batch = -1;  // -1 = all / not applicable
  int64_t head = -1;   // -1 = all / several (see heads) / not applicable
  IndexRange heads;    // the heads concerned when more than one (head = -1)
  IndexRange rows, cols;
  int64_t count = 0;  // elements / rows concerned
  std::string message;
  std::string remedy;
  // Context: the precision analysed ("fp16") and the kernel modes ("fused", "unfused") in
  // which the finding was seen; empty when it does not depend on a run (inputs, recordings).
  std::string precision;
  std::vector<std::string> modes;
  // Judged under what-if settings (CaseAnalysis::judged_under says which) rather than the
  // replay of the recorded run.
  bool what_if = false;
  // Every place of the finding once grouped (group_findings); the first is batch / head /
  // heads / rows / cols above. Empty before grouping.
  std::vector<FindingLocation> locations;
};

bool has_error(const std::vector<Finding>& findings);
// A finding about dO or the gradients (the backward side of a case), not its inputs / forward.
bool is_backward_finding(const Finding& f);
int64_t count_severity(const std::vector<Finding>& findings, Severity severity);

// Stable order for reports: severity (errors first), the forward side before the backward,
// then kind, batch, head, first row.
void sort_findings(std::vector<Finding>& findings);

// One finding per (kind, tensor, severity, judgement) (DESIGN §4): findings of the same kind
// and tensor at other batches / heads become locations of the first one (in report order),
// whose count is the sum and whose message adds where else it was seen. Sorted on return.
void group_findings(std::vector<Finding>& findings);

}  // namespace attnscope
