// Gradient norms of a case (per head, per row, total) and clip_grad_norm_ applied to one run's
// gradients with the norms before and after (DESIGN §3 gradient clipping).
#pragma once

#include "core/analysis/case_analysis.h"

namespace attnscope {

// Norms of dq [B,H,Sq,D], dk [B,Hk,Sk,D], dv [B,Hk,Sk,Dv] in fp64 (NaN / inf propagate).
GradientNorms gradient_norms(const CaseGradients& grads);
// The same of a run's gradients, without copying them.
GradientNorms gradient_norms(const AttnParams& params, const ModeRun& run);

// The run's gradients as a CaseGradients (copies).
CaseGradients run_gradients(const AttnParams& params, const ModeRun& run);

// Clips a copy of the run's gradients like clip_grad_norm_(max_norm) over `scope`, products
// rounded to the run's precision.
ClipReport make_clip_report(const AttnParams& params, const ModeRun& run, double max_norm,
                            ClipScope scope);

}  // namespace attnscope
