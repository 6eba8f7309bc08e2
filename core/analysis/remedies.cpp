// Remedy texts of the findings.
#include "core/analysis/remedies.h"

#include <cmath>

#include "core/analysis/finding_text.h"
#include "core/case_inputs.h"

namespace attnscope {

std::string remedy_nonfinite_input(const std::string& tensor) {
  return "attention cannot repair a non-finite " + tensor +
         ": find the op that produced it upstream (torch.autograd.set_detect_anomaly(True), "
         "check the previous layer, its norm and the optimizer state); gradient clipping cannot "
         "help with NaN/Inf";
}

std::string remedy_score_overflow(Precision p, double max_abs_s) {
  const double limit = finfo_max(p);
  // Scaling q before the matmul helps only when the scaled scores fit.
  std::string text =
      max_abs_s <= limit
          ? "scale q before the matmul ((q * scale) @ k^T, or q and k by sqrt(scale)): scaled, "
            "max |S| = " +
                num(max_abs_s) + " fits " + precision_name(p) +
                "; or use a fused kernel (SDPA flash / FlashAttention) that keeps scores in fp32"
          : "lower the scale or normalise q and k (QK-norm) so scores stay below " + num(limit) +
                ": scaled, max |S| = " + num(max_abs_s) +
                " still overflows, so scaling q before the matmul alone does not help; or use a "
                "fused kernel (SDPA flash / FlashAttention) that keeps scores in fp32";
  if (p != Precision::f16) return text;
  // bf16 keeps 8 significant bits: its spacing near |S| is |S| * 2^-8 (rounded down to a power
  // of two); beyond ~0.5 the rounded scores lose the differences softmax depends on.
  const double spacing = std::exp2(std::floor(std::log2(max_abs_s)) - 7);
  if (spacing <= 0.5) return text + "; or run attention in bf16 (max 3.4e38)";
  return text + "; bf16 would not overflow, but its spacing at |S| = " + num(max_abs_s) + " is " +
         num(spacing) + ", which erases score differences";
}

std::string remedy_mask_fill_overflow(Precision p, bool from_bias) {
  const std::string min = num(-finfo_max(p));
  if (from_bias) {
    return "build the additive mask with a value representable in " +
           std::string(precision_name(p)) + " (torch.finfo(dtype).min = " + min +
           ", not -1e9), or pass a bool mask to SDPA; if a row may be fully padded use safe "
           "softmax (PyTorch >= 2.5) or drop those rows";
  }
  return "fill masked scores with torch.finfo(dtype).min (" + min +
         ") or -inf with safe softmax instead of -1e9, or let SDPA apply a bool mask";
}

std::string remedy_fully_masked_row(const std::string& outcome, bool sentinel_overflow) {
  std::string text =
      "give every query at least one visible key (e.g. let padded queries see themselves), "
      "drop fully padded rows from the loss, or use safe softmax (PyTorch >= 2.5 SDPA / mask "
      "fill 'safe') so they give O = 0";
  if (sentinel_overflow) {
    text =
        "clamp the masked scores to the dtype's range (torch.clamp(scores + mask, "
        "min=torch.finfo(dtype).min)) or run the softmax in fp32 (softmax(scores, dim=-1, "
        "dtype=torch.float32)); or " +
        text;
  }
  if (outcome == "uniform") {
    text += "; a finite fill makes them attend uniformly to masked (padding) keys";
  }
  return text;
}

std::string remedy_masked_nan_leak() {
  return "masking does not stop NaN: 0 * NaN = NaN in P V. Zero padded keys/values before "
         "attention (v.masked_fill(~key_mask[..., None], 0)) and fix the op that wrote NaN there";
}

std::string remedy_exp_overflow(bool recorded_lse) {
  if (recorded_lse) {
    return "the recorded LSE does not belong to these scores: save LSE from the same forward "
           "(same scale, mask, dtype) that the backward recomputes";
  }
  return "avoid huge negative biases (use a bool mask or -inf with safe softmax) and compute "
         "P as exp(S - LSE) in one exp, never exp(S) * exp(-LSE)";
}

std::string remedy_for_cause(Provenance cause, bool gradient) {
  switch (cause) {
    case Provenance::input:
      return "a q/k/v/dO/bias element is already non-finite: see nonfinite_input; clipping cannot "
             "help";
    case Provenance::score_overflow:
      return "see score_overflow: scale q before the matmul or lower the scale (whichever brings "
             "|S| in range), or use bf16 / a fused kernel";
    case Provenance::mask_fill:
    case Provenance::fully_masked_row:
      return "see fully_masked_row / mask_fill_overflow: use safe softmax or a representable "
             "fill, or give each row a visible key";
    case Provenance::exp_overflow:
      return "see exp_overflow";
    case Provenance::propagated:
      return "these elements only inherit NaN/Inf from poisoned query rows (see the O / dQ "
             "findings): fix that cause; clipping cannot repair NaN/Inf";
    default:
      break;
  }
  if (gradient) {
    return "a gradient left the precision's range: lower the loss scale (GradScaler) or the "
           "upstream gradient, or keep gradients in fp32; clipping cannot repair NaN/Inf";
  }
  return "the output left the precision's range: keep attention outputs in fp32 or bf16";
}

std::string remedy_gradient_explosion(bool from_upstream, double clip_coef, double max_norm) {
  std::string text = from_upstream
                         ? "the upstream gradient dO is already this large: find the layer after "
                           "attention that inflates it (loss scale, missing norm, a bad sample)"
                         : "look for the large scores / values that make this head's softmax "
                           "Jacobian large";
  text += "; clip_grad_norm_(max_norm=" + num(max_norm) + ") would scale every gradient by " +
          num(clip_coef) +
          ", shrinking the healthy heads by the same factor: clip per parameter group or fix "
          "the source";
  return text;
}

std::string remedy_clip_spreads_nan() {
  return "clipping cannot help with non-finite gradients: fix their source (see "
         "nonfinite_gradient), and skip the step when the norm is non-finite "
         "(clip_grad_norm_(..., error_if_nonfinite=True) or GradScaler's inf check)";
}

std::string remedy_recorded_mismatch(const std::string& tensor, bool columns) {
  std::string text = "the real run's " + tensor +
                     " is wrong although it may be finite: check the kernel's inputs (scale, "
                     "mask, layout BHSD vs BSHD, GQA head mapping) and its version; compare "
                     "against torch SDPA math on this dump";
  if (columns) text += "; errors confined to some head-dim columns point at a layout/stride bug";
  return text;
}

std::string remedy_precision_loss(Precision p) {
  return "the " + std::string(precision_name(p)) +
         " result is far from fp64: scores this large lose their differences when rounded; "
         "lower the scale / normalise q and k, keep the softmax in fp32 (fused kernel), or use "
         "fp32 for this layer";
}

std::string remedy_silent_zero_row(bool recorded) {
  if (recorded) {
    return "the real kernel returned zeros for rows that attend to keys: check causal "
           "alignment (top-left vs bottom-right when Sq != Sk), varlen offsets and the mask";
  }
  return "the values V these rows attend to are zero (or underflow in the precision): check "
         "padding of v and the mask";
}

std::string remedy_dropout_unavailable(const std::string& replay, const std::string& note) {
  const std::string zero =
      "record it in eval mode / with dropout_p = 0 to check the attention itself";
  if (replay != "unavailable") {
    return "record the step with attnscope_record (it stores the keep-mask where it can "
           "reproduce it), or " +
           zero;
  }
  // attnscope_record wrote this dump and said why it could not store the mask.
  if (note.find("torch.compile") != std::string::npos) {
    return "record the step outside torch.compile (an eager step, or torch.compiler.disable "
           "around the attention), where attnscope_record stores the keep-mask, or " +
           zero;
  }
  return "this kernel draws its dropout mask where attnscope_record cannot reproduce it: " + zero;
}

}  // namespace attnscope
