// Where NaN / Inf first appear (DESIGN §4, §5): within one case, the non-finite findings in the
// order the kernel computes their stages (inputs, S, P, O / LSE, then dO and the gradients);
// over a run, the first case in execution order with a non-finite value: steps and
// micro-batches in run order, forward layers ascending, then backward layers descending. A NaN
// made in layer 2's forward reaches layer 0 only through its gradients, so the origin is layer
// 2, not the first case in the file with an error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/finding.h"

namespace attnscope {

// The stages of a case in the order the kernel computes them.
enum class NonfiniteStage : uint8_t { inputs, scores, probabilities, outputs, upstream, gradients };

// "inputs", "S", "P", "O", "dO", "gradients".
const char* nonfinite_stage_name(NonfiniteStage stage);
// The stage nonfinite_stage_name spells `name`; nullopt for any other text.
std::optional<NonfiniteStage> nonfinite_stage_named(const std::string& name);
// The backward side: dO and the gradients.
bool is_backward_stage(NonfiniteStage stage);

// One place where a case holds non-finite values: a non-finite finding (error severity) of the
// replay, with the view that shows it best (a fully masked row shows in P, the finding says O).
struct NonfiniteSite {
  NonfiniteStage stage = NonfiniteStage::inputs;
  std::string kind;             // finding_kind_name
  std::string view;             // "q", "S", "P", "O", "LSE", "dO", "dQ", "dK", "dV", ...
  int64_t batch = 0, head = 0;  // where to look first: the finding's batch / first head
  IndexRange rows, cols;
  int64_t count = 0;
  std::vector<std::string> modes;  // kernel modes it was seen in (empty: any)
  std::string message;

  bool operator==(const NonfiniteSite& o) const;
};

// The non-finite findings of a case in stage order (report order within a stage).
std::vector<NonfiniteSite> nonfinite_sites(const std::vector<Finding>& findings);

// "S in batch 0, head 1, rows 3-7, cols 0-127 (score_overflow)".
std::string site_text(const NonfiniteSite& site);

}  // namespace attnscope
