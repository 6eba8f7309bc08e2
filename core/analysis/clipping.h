// Gradient clipping exactly as torch.nn.utils.clip_grad_norm_(grads, max_norm, norm_type=2)
// (DESIGN §3): total = ||(||g_1||, ..., ||g_n||)||, coef = max_norm / (total + 1e-6) clamped
// to at most 1 (a NaN coef stays NaN), every gradient multiplied by it. A NaN total makes
// every clipped gradient NaN; an infinite one zeroes every finite element and turns the
// non-finite ones NaN. attnscope shows that instead of hiding it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/attn_params.h"

namespace attnscope {

// One gradient tensor taking part in the clip (modified in place by clip_gradients).
struct GradientRef {
  std::string name;  // "dQ[b0,h3]" or "dQ"
  float* data = nullptr;
  int64_t count = 0;
};

struct ClipResult {
  double max_norm = 0;
  double total_norm = 0;  // before clipping
  double coef = 1;        // clamped coefficient actually applied
  bool nonfinite_total = false;
  std::vector<std::string> names;                 // of the GradientRefs, in their order
  std::vector<double> norms_before, norms_after;  // per GradientRef, same order
};

// Clips `grads` in place; products are rounded to `precision` like a gradient stored in it.
ClipResult clip_gradients(const std::vector<GradientRef>& grads, double max_norm,
                          Precision precision);

// What clip_gradients does with its coefficient: every element times (float) coef, rounded
// to `precision`. Returns the norms after, per GradientRef.
std::vector<double> scale_gradients(const std::vector<GradientRef>& grads, double coef,
                                    Precision precision);

// L2 norm in fp64 (inf / NaN propagate).
double l2_norm(const float* data, int64_t count);

// Which gradients one clip call covers.
enum class ClipScope : uint8_t {
  whole_case,  // dQ, dK, dV of the case together (one optimizer-style clip)
  per_kv_head  // per (batch, kv head): its dK, dV and the dQ of the query heads reading it
};

// "case" / "kv-head" (the command lines' --clip-scope), and back (nullopt for other text).
const char* clip_scope_name(ClipScope scope);
std::optional<ClipScope> clip_scope_named(const std::string& name);

// Gradients of a case: dq [B,H,Sq,D], dk [B,Hk,Sk,D], dv [B,Hk,Sk,Dv].
struct CaseGradients {
  int64_t batch = 0, heads = 0, kv_heads = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0,
          head_dim_v = 0;
  std::vector<float> dq, dk, dv;

  // The dimensions of a case's params, no gradients yet.
  static CaseGradients shaped_like(const AttnParams& p);
};

// The gradients one clip call covers, in the order it sums them: whole_case dQ, dK, dV of the
// case (b, g ignored); per_kv_head dK and dV of (b, kv head g), then the dQ of its query heads.
std::vector<GradientRef> clip_set(CaseGradients& grads, ClipScope scope, int64_t b, int64_t g);

// Clips the case's gradients in place; one ClipResult per clip call (1 for whole_case,
// B * Hk for per_kv_head, in (b, g) order).
std::vector<ClipResult> clip_case_gradients(CaseGradients& grads, ClipScope scope, double max_norm,
                                            Precision precision);

}  // namespace attnscope
