// Names of the kernels' enums (kernels/attn_params.h, kernels/attn_types.h), one function per
// enum, as the CLI, the JSON reports, the findings and the GUI print them. Reports and dumps
// carry them, so they never change. mask_fill_label is the mask fill as people write it, for
// what the window and the reports say in words.
#pragma once

#include "kernels/attn_params.h"
#include "kernels/attn_types.h"

namespace attnscope {

const char* precision_name(Precision p);       // "fp64", "fp32", "fp16", "bf16"
const char* mask_fill_name(MaskFill fill);     // "neg_inf", "-1e9", "finfo_min", "safe"
const char* mask_fill_label(MaskFill fill);    // "-inf", "-1e9", "finfo.min", "safe"
const char* causal_align_name(CausalAlign a);  // "top_left", "bottom_right" (dump attribute)
const char* backward_p_name(BackwardP b);      // "saved", "from_lse"
const char* mode_name(Mode m);                 // "fused", "unfused"
const char* provenance_name(Provenance p);     // "finite", "input", ... (DESIGN §4 codes)
const char* cell_class_name(CellClass cls);    // "finite", "NaN", "+inf", "-inf", "masked"
// The stage function a step calls ("backward_postprocess" for both stores; "start").
const char* step_stage_name(StepStage stage);

}  // namespace attnscope
