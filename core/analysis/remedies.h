// Remedies from the field's practice, one per diagnosis, worded for the user who has to act:
// what to change in the model / training code, and when a tempting fix (clipping) cannot help.
#pragma once

#include <string>

#include "kernels/attn_params.h"
#include "kernels/attn_types.h"  // Provenance

namespace attnscope {

std::string remedy_nonfinite_input(const std::string& tensor);
// max_abs_s: the largest scaled |S| (fp64): scaling q before the matmul is offered only when it
// fits the precision (else lowering the scale / QK-norm leads), and bf16 when its spacing there
// keeps score differences.
std::string remedy_score_overflow(Precision p, double max_abs_s);
std::string remedy_mask_fill_overflow(Precision p, bool from_bias);
// outcome: what the rows produced ("NaN", "uniform", "zero").
// sentinel_overflow: a row of finite sentinels that still turned NaN (S + bias rounded to -inf).
std::string remedy_fully_masked_row(const std::string& outcome, bool sentinel_overflow);
std::string remedy_masked_nan_leak();
std::string remedy_exp_overflow(bool recorded_lse);
// The remedy of the finding that explains a non-finite output or gradient.
std::string remedy_for_cause(Provenance cause, bool gradient);
std::string remedy_gradient_explosion(bool from_upstream, double clip_coef, double max_norm);
std::string remedy_clip_spreads_nan();
std::string remedy_recorded_mismatch(const std::string& tensor, bool columns);
std::string remedy_precision_loss(Precision p);
std::string remedy_silent_zero_row(bool recorded);
// Dropout without a keep-mask: `replay` and `note` are the dump's dropout_replay / dropout_note
// ("unavailable" and why, when attnscope_record wrote it; empty from another writer).
std::string remedy_dropout_unavailable(const std::string& replay, const std::string& note);

}  // namespace attnscope
