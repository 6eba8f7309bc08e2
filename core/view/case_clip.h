// One clip definition for the views of a head (DESIGN §3, issue 15): clip_grad_norm_ over the
// gradients of the whole case (or of one kv-head group), as the analysis behind the findings
// and `attnscope-cli run --clip` clip them, applied to the head the views show. The case's dQ,
// dK, dV are computed like the head's (the own CPU kernel in the request's mode, or its registry
// backend); the head's gradients are then scaled by the coefficient of the clip call covering
// it, rounded like clip_gradients rounds. Plain C++, no Qt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/analysis/clipping.h"
#include "core/case_inputs.h"
#include "core/result.h"

namespace attnscope {

// dQ, dK, dV of the whole case `data` at `scale`: the own CPU kernel in `mode` when `backend` is
// empty, else registry variant `backend` (in its own mode and precision when it fixes them), with
// the params of `inputs` (made from `data`; its fp64 values are read only by a backend). Fails
// like run_backend; throws KernelCancelled once `cancelled` returns true (CPU kernels only).
Result<CaseGradients> case_gradients(const CaseData& data, const CaseInputs& inputs, double scale,
                                     Mode mode, const std::string& backend, int threads,
                                     const std::function<bool()>& cancelled);

// Every clip call of clip_case_gradients(grads, scope, max_norm, precision), computed on a copy
// (grads is not modified): the same total norms, coefficients and norms.
std::vector<ClipResult> case_clips(const CaseGradients& grads, ClipScope scope, double max_norm,
                                   Precision precision);

// Index into case_clips(grads, scope, ...) of the call covering query head h of batch b.
size_t covering_clip(const CaseGradients& grads, ClipScope scope, int64_t b, int64_t h);

// Scales one head's gradients (dq [Sq x D], dk [Sk x D], dv [Sk x Dv]) by the clip's coefficient
// in place, rounded to `precision`.
void apply_clip(const ClipResult& clip, Precision precision, std::vector<float>& dq,
                std::vector<float>& dk, std::vector<float>& dv);

}  // namespace attnscope
