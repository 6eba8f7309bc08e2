// Per-head and per-column comparison of a recorded output with the fp64 recomputation.
#include "core/analysis/recorded_check.h"

#include <algorithm>
#include <cmath>

namespace attnscope {
namespace {

double max_abs_finite(const std::vector<double>& a) {
  double worst = 0;
  for (double x : a) {
    if (std::isfinite(x)) worst = std::fmax(worst, std::fabs(x));
  }
  return worst;
}

// Both NaN, or both the same infinity.
bool same_class(double a, double b) {
  return std::isnan(a) ? std::isnan(b) : a == b;
}

}  // namespace

double accuracy_floor(double max_abs_reference) {
  return 1e-6 * std::fmax(1.0, max_abs_reference);
}

std::optional<Precision> stored_precision(DType t) {
  if (t == DType::f16) return Precision::f16;
  if (t == DType::bf16) return Precision::bf16;
  if (t == DType::f32) return Precision::f32;
  return std::nullopt;
}

double storage_ulp(Precision p, double x) {
  // Mantissa bits and the smallest normal exponent of each format.
  const int mantissa = p == Precision::f16 ? 10 : p == Precision::bf16 ? 7 : 23;
  const int min_exponent = p == Precision::f16 ? -14 : -126;
  const double a = std::fabs(x);
  const int e = a > 0 && std::isfinite(a) ? std::max(std::ilogb(a), min_exponent) : min_exponent;
  return std::ldexp(1.0, e - mantissa);
}

RecordedComparison compare_recorded(const RecordedComparisonInputs& in) {
  const std::vector<double>& ref = *in.reference;
  const TensorGeometry& g = in.geometry;
  const int64_t per_outer = g.rows * g.cols;
  // One head of the recording (or of the baseline, the same-precision run) at a time.
  std::vector<double> rec(static_cast<size_t>(per_outer));
  RecordedComparison out;
  out.tensor = in.tensor;
  const double factor = in.gradient ? 3.0 : 2.0;
  for (int64_t o = 0; o < g.outer; ++o) {
    const int64_t base = o * per_outer;
    in.baseline(base, per_outer, rec.data());
    for (int64_t e = 0; e < per_outer; ++e) {
      const double r = ref[static_cast<size_t>(base + e)];
      if (std::isfinite(rec[static_cast<size_t>(e)]) && std::isfinite(r)) {
        out.baseline_error =
            std::fmax(out.baseline_error, std::fabs(rec[static_cast<size_t>(e)] - r));
      }
    }
  }
  out.threshold = factor * out.baseline_error + accuracy_floor(max_abs_finite(ref));
  out.column_max_error.assign(static_cast<size_t>(g.cols), 0.0);

  std::vector<double> same;  // one head of the replay's own kernel, when given
  if (in.same_precision) same.resize(static_cast<size_t>(per_outer));
  for (int64_t o = 0; o < g.outer; ++o) {
    const int64_t base = o * per_outer;
    const double* r = ref.data() + base;
    in.recorded(base, per_outer, rec.data());
    if (in.same_precision) in.same_precision(base, per_outer, same.data());
    const PairStats s = compare_values(rec.data(), r, per_outer);
    HeadComparison head;
    head.batch = o / g.heads;
    head.head = o % g.heads;
    head.cosine = s.cosine;
    head.norm_ratio = s.norm_ratio;
    head.max_error = s.max_error;
    head.recorded_only = s.nonfinite_a_only;
    head.reference_only = s.nonfinite_ref_only;
    head.column_max_error.assign(static_cast<size_t>(g.cols), 0.0);
    bool beyond = false;  // an element beyond max(threshold, one stored ulp)
    for (int64_t e = 0; e < per_outer; ++e) {
      const double x = rec[static_cast<size_t>(e)];
      const bool finite = std::isfinite(x) && std::isfinite(r[e]);
      out.finite_pairs += finite;
      if (!std::isfinite(x) && std::isfinite(r[e]) && !same.empty() &&
          same_class(x, same[static_cast<size_t>(e)])) {
        ++head.replay_nonfinite;  // the recorded kernel's own overflow, reproduced
        continue;
      }
      const double err = finite ? std::fabs(x - r[e]) : 0.0;
      const double allowed = in.stored
                                 ? std::fmax(out.threshold, static_cast<double>(in.roundings) *
                                                                storage_ulp(*in.stored, r[e]))
                                 : out.threshold;
      if (std::isfinite(x) != std::isfinite(r[e]) || err > allowed) {
        const int64_t row = e / g.cols;
        if (head.bad_row_first < 0) head.bad_row_first = row;
        head.bad_row_last = row;
        beyond = beyond || err > allowed;
      }
      double& column = head.column_max_error[static_cast<size_t>(e % g.cols)];
      column = std::fmax(column, err);
    }
    head.recorded_only -= head.replay_nonfinite;
    head.nonfinite_mismatch = head.recorded_only + head.reference_only;
    for (size_t c = 0; c < head.column_max_error.size(); ++c) {
      out.column_max_error[c] = std::fmax(out.column_max_error[c], head.column_max_error[c]);
    }
    if (in.same_precision) {
      const PairStats sp = compare_values(rec.data(), same.data(), per_outer);
      head.same_precision_cosine = sp.cosine;
      head.same_precision_max_error = sp.max_error;
    }
    head.within_rule = head.nonfinite_mismatch == 0 && !beyond;
    out.within_rule = out.within_rule && head.within_rule;
    out.max_error = std::fmax(out.max_error, head.max_error);
    out.heads.push_back(head);
  }
  return out;
}

}  // namespace attnscope
