// clip_grad_norm_ emulation over gradient tensors and over a case's dQ / dK / dV.
#include "core/analysis/clipping.h"

#include <cmath>

#include "kernels/precision.h"

namespace attnscope {

double l2_norm(const float* data, int64_t count) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(data[i]) * data[i];
  return std::sqrt(sum);
}

ClipResult clip_gradients(const std::vector<GradientRef>& grads, double max_norm,
                          Precision precision) {
  ClipResult r;
  r.max_norm = max_norm;
  double sum_sq = 0;
  for (const GradientRef& g : grads) {
    const double n = l2_norm(g.data, g.count);
    r.names.push_back(g.name);
    r.norms_before.push_back(n);
    sum_sq += n * n;
  }
  r.total_norm = std::sqrt(sum_sq);
  r.nonfinite_total = !std::isfinite(r.total_norm);
  const double coef = max_norm / (r.total_norm + 1e-6);
  // torch.clamp(coef, max=1.0): NaN stays NaN.
  r.coef = std::isnan(coef) ? coef : std::fmin(coef, 1.0);
  r.norms_after = scale_gradients(grads, r.coef, precision);
  return r;
}

std::vector<double> scale_gradients(const std::vector<GradientRef>& grads, double coef,
                                    Precision precision) {
  const float factor = static_cast<float>(coef);
  std::vector<double> norms;
  for (const GradientRef& g : grads) {
    for (int64_t i = 0; i < g.count; ++i) g.data[i] = round_to(precision, g.data[i] * factor);
    norms.push_back(l2_norm(g.data, g.count));
  }
  return norms;
}

CaseGradients CaseGradients::shaped_like(const AttnParams& p) {
  CaseGradients g;
  g.batch = p.batch;
  g.heads = p.heads;
  g.kv_heads = p.kv_heads;
  g.seqlen_q = p.seqlen_q;
  g.seqlen_k = p.seqlen_k;
  g.head_dim = p.head_dim;
  g.head_dim_v = p.head_dim_v;
  return g;
}

const char* clip_scope_name(ClipScope scope) {
  return scope == ClipScope::whole_case ? "case" : "kv-head";
}

std::optional<ClipScope> clip_scope_named(const std::string& name) {
  for (ClipScope s : {ClipScope::whole_case, ClipScope::per_kv_head}) {
    if (name == clip_scope_name(s)) return s;
  }
  return std::nullopt;
}

std::vector<GradientRef> clip_set(CaseGradients& grads, ClipScope scope, int64_t b, int64_t g) {
  if (scope == ClipScope::whole_case) {
    return {{"dQ", grads.dq.data(), static_cast<int64_t>(grads.dq.size())},
            {"dK", grads.dk.data(), static_cast<int64_t>(grads.dk.size())},
            {"dV", grads.dv.data(), static_cast<int64_t>(grads.dv.size())}};
  }
  const int64_t q_head = grads.seqlen_q * grads.head_dim;
  const int64_t k_head = grads.seqlen_k * grads.head_dim;
  const int64_t v_head = grads.seqlen_k * grads.head_dim_v;
  const int64_t group = grads.heads / grads.kv_heads;
  const std::string where = "[b" + std::to_string(b) + ",";
  const int64_t bg = b * grads.kv_heads + g;
  std::vector<GradientRef> set = {
      {"dK" + where + "hk" + std::to_string(g) + "]", grads.dk.data() + bg * k_head, k_head},
      {"dV" + where + "hk" + std::to_string(g) + "]", grads.dv.data() + bg * v_head, v_head}};
  for (int64_t h = g * group; h < (g + 1) * group; ++h) {
    set.push_back({"dQ" + where + "h" + std::to_string(h) + "]",
                   grads.dq.data() + (b * grads.heads + h) * q_head, q_head});
  }
  return set;
}

std::vector<ClipResult> clip_case_gradients(CaseGradients& grads, ClipScope scope, double max_norm,
                                            Precision precision) {
  if (scope == ClipScope::whole_case) {
    return {clip_gradients(clip_set(grads, scope, 0, 0), max_norm, precision)};
  }
  std::vector<ClipResult> results;
  for (int64_t b = 0; b < grads.batch; ++b) {
    for (int64_t g = 0; g < grads.kv_heads; ++g) {
      results.push_back(clip_gradients(clip_set(grads, scope, b, g), max_norm, precision));
    }
  }
  return results;
}

}  // namespace attnscope
