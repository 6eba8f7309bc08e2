// Inference of the run semantics a dump does not record (DESIGN §3): when the recorded o
// breaks the accuracy rule against the replay under the documented defaults, the fully masked
// row convention (NaN, O = 0, uniform over the masked keys) and the softmax scale (1/sqrt(D),
// 1, 1/D, sqrt(D)) that reproduce it are looked for among fp64 forwards. analyze_case judges
// the case again under what was found and names it (recorded_convention finding, the JSON's
// `inferred`); a recorded scale the recording contradicts is only named, never replaced.
#pragma once

#include <optional>
#include <string>

#include "core/analysis/finding.h"
#include "core/analysis/recorded_check.h"
#include "core/case_model.h"

namespace attnscope {

struct RunInference {
  // The fill when the dump names no backend, the scale when it has no scale attribute.
  InferredRun run;
  // The dump records a scale, but the recorded o matches this one (the missing 1/sqrt(D) bug).
  std::optional<double> scale_hint;
};

// The simplest candidate (the fill alone, then the scale alone, then both) whose fp64 forward
// reproduces the recorded o: no element finite on one side only, every error within
// max(`o.threshold`, two stored ulps). Candidates: the fills when the dump names no backend
// and has fully masked rows (`fully_masked_rows`), the scales always (an absent attribute is
// inferred, a recorded one hinted at). Costs one fp64 forward per candidate, up to 11.
RunInference infer_run(const CaseData& data, const RecordedComparison& o, bool fully_masked_rows,
                       int threads);

// The info finding naming what was inferred and judged under; the warning naming a recorded
// scale the recording contradicts.
Finding inferred_run_finding(const CaseData& data, const InferredRun& inferred);
Finding scale_hint_finding(const CaseData& data, double hint);

}  // namespace attnscope
