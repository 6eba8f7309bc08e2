// Per-head and per-column comparison of a recorded output with the fp64 recomputation.
#include "core/analysis/recorded_check.h"

#include <cmath>

namespace attnscope {
namespace {

double max_abs_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isfinite(a[i]) && std::isfinite(b[i])) worst = std::fmax(worst, std::fabs(a[i] - b[i]));
  }
  return worst;
}

double max_abs_finite(const std::vector<double>& a) {
  double worst = 0;
  for (double x : a) {
    if (std::isfinite(x)) worst = std::fmax(worst, std::fabs(x));
  }
  return worst;
}

}  // namespace

double accuracy_floor(double max_abs_reference) {
  return 1e-6 * std::fmax(1.0, max_abs_reference);
}

RecordedComparison compare_recorded(const RecordedComparisonInputs& in) {
  const std::vector<double>& rec = *in.recorded;
  const std::vector<double>& ref = *in.reference;
  const TensorGeometry& g = in.geometry;
  RecordedComparison out;
  out.tensor = in.tensor;
  const double factor = in.gradient ? 3.0 : 2.0;
  out.threshold = factor * max_abs_difference(*in.baseline, ref) + accuracy_floor(max_abs_finite(ref));
  out.column_max_error.assign(static_cast<size_t>(g.cols), 0.0);

  const int64_t per_outer = g.rows * g.cols;
  for (int64_t o = 0; o < g.outer; ++o) {
    HeadComparison head;
    head.batch = o / g.heads;
    head.head = o % g.heads;
    double dot = 0, rec_sq = 0, ref_sq = 0;
    for (int64_t e = o * per_outer; e < (o + 1) * per_outer; ++e) {
      const double r = rec[e], x = ref[e];
      if (std::isfinite(r) != std::isfinite(x)) {
        ++head.nonfinite_mismatch;
        continue;
      }
      if (!std::isfinite(r)) continue;
      dot += r * x;
      rec_sq += r * r;
      ref_sq += x * x;
      const double err = std::fabs(r - x);
      head.max_error = std::fmax(head.max_error, err);
      double& column = out.column_max_error[static_cast<size_t>(e % g.cols)];
      column = std::fmax(column, err);
    }
    if (rec_sq > 0 && ref_sq > 0) {
      head.cosine = dot / (std::sqrt(rec_sq) * std::sqrt(ref_sq));
      head.norm_ratio = std::sqrt(rec_sq / ref_sq);
    } else if (rec_sq != ref_sq) {  // one is all zero, the other not
      head.cosine = 0;
      head.norm_ratio = ref_sq > 0 ? 0 : INFINITY;
    }
    head.within_rule = head.nonfinite_mismatch == 0 && head.max_error <= out.threshold;
    out.within_rule = out.within_rule && head.within_rule;
    out.max_error = std::fmax(out.max_error, head.max_error);
    out.heads.push_back(head);
  }
  return out;
}

}  // namespace attnscope
