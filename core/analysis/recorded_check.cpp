// Per-head and per-column comparison of a recorded output with the fp64 recomputation.
#include "core/analysis/recorded_check.h"

#include <algorithm>
#include <cmath>

namespace attnscope {
namespace {

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
  RecordedComparer comparer(in);
  HeadScratch scratch;
  const int64_t per_outer = in.geometry.rows * in.geometry.cols;
  for (int64_t o = 0; o < in.geometry.outer; ++o) {
    comparer.add(o, in.reference->data() + o * per_outer, scratch);
  }
  return comparer.finish();
}

RecordedComparer::RecordedComparer(RecordedComparisonInputs in) : in_(std::move(in)) {
  const TensorGeometry& g = in_.geometry;
  out_.tensor = in_.tensor;
  out_.column_max_error.assign(static_cast<size_t>(g.cols), 0.0);
}

void RecordedComparer::add(int64_t o, const double* r, HeadScratch& scratch) {
  const TensorGeometry& g = in_.geometry;
  const int64_t per_outer = g.rows * g.cols, base = o * per_outer;
  std::vector<double>& rec = scratch.recorded;
  std::vector<double>& same = scratch.same;
  rec.resize(static_cast<size_t>(per_outer));
  same.resize(in_.same_precision ? rec.size() : 0);
  // The accuracy rule's baseline (unfused at the recorded precision) against fp64.
  in_.baseline(base, per_outer, rec.data());
  for (int64_t e = 0; e < per_outer; ++e) {
    if (!std::isfinite(r[e])) continue;
    max_abs_reference_ = std::fmax(max_abs_reference_, std::fabs(r[e]));
    if (std::isfinite(rec[static_cast<size_t>(e)])) {
      out_.baseline_error =
          std::fmax(out_.baseline_error, std::fabs(rec[static_cast<size_t>(e)] - r[e]));
    }
  }
  in_.recorded(base, per_outer, rec.data());
  if (in_.same_precision) in_.same_precision(base, per_outer, same.data());
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
  std::vector<double>& excess = row_excess_.emplace_back(static_cast<size_t>(g.rows), 0.0);
  for (int64_t e = 0; e < per_outer; ++e) {
    const double x = rec[static_cast<size_t>(e)];
    const bool finite = std::isfinite(x) && std::isfinite(r[e]);
    out_.finite_pairs += finite;
    if (!std::isfinite(x) && std::isfinite(r[e]) && !same.empty() &&
        same_class(x, same[static_cast<size_t>(e)])) {
      ++head.replay_nonfinite;  // the recorded kernel's own overflow, reproduced
      continue;
    }
    const double err = finite ? std::fabs(x - r[e]) : 0.0;
    // The element breaks the rule when err > max(threshold, the stored ulps): its error counts
    // here once above the ulps, and finish() compares the row's largest with the threshold.
    const double ulps =
        in_.stored ? static_cast<double>(in_.roundings) * storage_ulp(*in_.stored, r[e]) : 0.0;
    double& row = excess[static_cast<size_t>(e / g.cols)];
    if (std::isfinite(x) != std::isfinite(r[e])) {
      row = INFINITY;
    } else if (err > ulps) {
      row = std::fmax(row, err);
    }
    double& column = head.column_max_error[static_cast<size_t>(e % g.cols)];
    column = std::fmax(column, err);
  }
  head.recorded_only -= head.replay_nonfinite;
  head.nonfinite_mismatch = head.recorded_only + head.reference_only;
  for (size_t c = 0; c < head.column_max_error.size(); ++c) {
    out_.column_max_error[c] = std::fmax(out_.column_max_error[c], head.column_max_error[c]);
  }
  if (in_.same_precision) {
    const PairStats sp = compare_values(rec.data(), same.data(), per_outer);
    head.same_precision_cosine = sp.cosine;
    head.same_precision_max_error = sp.max_error;
  }
  out_.max_error = std::fmax(out_.max_error, head.max_error);
  out_.heads.push_back(head);
}

RecordedComparison RecordedComparer::finish() {
  const double factor = in_.gradient ? 3.0 : 2.0;
  out_.threshold = factor * out_.baseline_error + accuracy_floor(max_abs_reference_);
  for (size_t o = 0; o < out_.heads.size(); ++o) {
    HeadComparison& head = out_.heads[o];
    bool beyond = false;  // an element beyond max(threshold, its stored ulps)
    for (size_t row = 0; row < row_excess_[o].size(); ++row) {
      if (!(row_excess_[o][row] > out_.threshold)) continue;
      if (head.bad_row_first < 0) head.bad_row_first = static_cast<int64_t>(row);
      head.bad_row_last = static_cast<int64_t>(row);
      beyond = beyond || std::isfinite(row_excess_[o][row]);
    }
    head.within_rule = head.nonfinite_mismatch == 0 && !beyond;
    out_.within_rule = out_.within_rule && head.within_rule;
  }
  return std::move(out_);
}

}  // namespace attnscope
