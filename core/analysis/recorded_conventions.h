// Convention checks on recorded tensors (DESIGN §4): a recorded LSE in base 2 (or scaled by
// ln 2, pytorch #181645) or laid out sequence-major, and a bool mask of the opposite polarity
// (TransformerEngine's True = masked out), are recognised and named (recorded_convention)
// instead of reported as a wrong recording.
#pragma once

#include <optional>
#include <vector>

#include "core/analysis/finding.h"
#include "core/analysis/recorded_check.h"
#include "core/case_model.h"

namespace attnscope {

// The info finding of an lse the reader took as sequence-major ([B, Sq, H]); none otherwise.
std::optional<Finding> lse_layout_finding(const CaseInfo& info);

// A failing lse comparison `c` judged again with the recording read in the other bases
// (x ln 2: base-2 LSE; x 1 / ln 2: an LSE scaled by ln 2); when one is within the rule, `c`
// becomes that comparison and the warning naming the base is returned. `in` are the inputs
// `c` was made from.
std::optional<Finding> lse_base_convention(RecordedComparison& c,
                                           const RecordedComparisonInputs& in);

// True when the case's bool mask has the opposite polarity: the recorded o breaks the rule
// against the fp64 replay with the mask as stored (`o_within_rule` false) and is within
// `threshold` of the fp64 forward with the mask inverted. Needs a bool mask and a recorded o;
// costs one fp64 forward.
bool mask_polarity_inverted(const CaseData& data, bool o_within_rule, double threshold,
                            int threads);

// The finding naming an inverted mask polarity.
Finding mask_polarity_finding(const CaseData& data);

}  // namespace attnscope
