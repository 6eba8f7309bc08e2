// Per-head / per-row gradient norms and the clip report of one run.
#include "core/analysis/clip_report.h"

#include <cmath>

namespace attnscope {
namespace {

// Row norms [outer * rows] and head norms [outer] of x viewed as [outer, rows, dim].
void norms_of(const std::vector<float>& x, int64_t outer, int64_t rows, int64_t dim,
              std::vector<double>& head, std::vector<float>& row, double& total_sq) {
  head.assign(static_cast<size_t>(outer), 0.0);
  row.assign(static_cast<size_t>(outer * rows), 0.0f);
  for (int64_t o = 0; o < outer; ++o) {
    double head_sq = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double sq = std::pow(l2_norm(x.data() + (o * rows + r) * dim, dim), 2);
      row[static_cast<size_t>(o * rows + r)] = static_cast<float>(std::sqrt(sq));
      head_sq += sq;
    }
    head[static_cast<size_t>(o)] = std::sqrt(head_sq);
    total_sq += head_sq;
  }
}

// Norms of dq, dk, dv shaped as the gradients of a case of `shape`'s dimensions.
GradientNorms norms_shaped(const CaseGradients& shape, const std::vector<float>& dq,
                           const std::vector<float>& dk, const std::vector<float>& dv) {
  const CaseGradients& g = shape;
  GradientNorms n;
  double total_sq = 0;
  norms_of(dq, g.batch * g.heads, g.seqlen_q, g.head_dim, n.dq_head, n.dq_row, total_sq);
  norms_of(dk, g.batch * g.kv_heads, g.seqlen_k, g.head_dim, n.dk_head, n.dk_row, total_sq);
  norms_of(dv, g.batch * g.kv_heads, g.seqlen_k, g.head_dim_v, n.dv_head, n.dv_row, total_sq);
  n.total = std::sqrt(total_sq);
  return n;
}

}  // namespace

GradientNorms gradient_norms(const CaseGradients& g) {
  return norms_shaped(g, g.dq, g.dk, g.dv);
}

GradientNorms gradient_norms(const AttnParams& params, const ModeRun& run) {
  return norms_shaped(CaseGradients::shaped_like(params), run.out.dq, run.out.dk, run.out.dv);
}

CaseGradients run_gradients(const AttnParams& p, const ModeRun& run) {
  CaseGradients g = CaseGradients::shaped_like(p);
  g.dq = run.out.dq;
  g.dk = run.out.dk;
  g.dv = run.out.dv;
  return g;
}

ClipReport make_clip_report(const AttnParams& params, const ModeRun& run, double max_norm,
                            ClipScope scope) {
  ClipReport report;
  report.mode = run.mode;
  report.scope = scope;
  report.max_norm = max_norm;
  report.clipped = run_gradients(params, run);
  report.before = gradient_norms(report.clipped);
  report.clips = clip_case_gradients(report.clipped, scope, max_norm, run.precision);
  report.after = gradient_norms(report.clipped);
  return report;
}

}  // namespace attnscope
