// fp64 recomputation of a case for the recorded-output check and precision_loss: the forward
// streamed row by row (no [Sq, Sk] buffer), the gradients by the naive reference kernel one
// (batch, kv group) at a time, so memory stays O(group * Sq * Sk) per worker.
#pragma once

#include <cstdint>

#include "core/analysis/case_analysis.h"
#include "core/case_inputs.h"

namespace attnscope {

// Same semantics as kernels/reference (mask fill of in.params.precision, softcap, bias, safe
// rows); gradients of sum(O * dO) (dO = 1 without a recorded dO) when `gradients` is set.
Reference64 compute_reference64(const CaseInputs& in, bool gradients, int threads);

}  // namespace attnscope
