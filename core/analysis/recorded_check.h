// Compares outputs recorded from the real run (o, lse, dq, dk, dv in the dump) with
// attnscope's recomputation: per-head cosine similarity, norm ratio, max error against the
// accuracy rule of DESIGN §3, and a per-column (head-dim) error profile; plus the pairwise
// statistics the backend matrix and precision_loss share.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/host_tensor.h"  // DType
#include "core/value_reader.h"
#include "kernels/attn_params.h"  // Precision

namespace attnscope {

// a vs ref over n elements: cosine and norm ratio over the pairs finite in both, max |a - ref|
// over them, relative L2 error ||a - ref|| / ||ref||, and how many pairs are finite in one only.
struct PairStats {
  double cosine = 1;      // 1 when both are zero; 0 when exactly one is
  double norm_ratio = 1;  // ||a|| / ||ref||
  double max_error = 0;
  double rel_l2 = 0;
  double max_abs_ref = 0;
  int64_t nonfinite = 0;           // non-finite elements of a
  int64_t nonfinite_mismatch = 0;  // finite in one and not the other (a_only + ref_only)
  int64_t nonfinite_a_only = 0;    // non-finite in a, finite in ref
  int64_t nonfinite_ref_only = 0;  // finite in a, non-finite in ref
};

template <typename T>
PairStats compare_values(const T* a, const double* ref, int64_t n) {
  PairStats s;
  double dot = 0, a_sq = 0, ref_sq = 0, err_sq = 0;
  for (int64_t e = 0; e < n; ++e) {
    const double x = static_cast<double>(a[e]), r = ref[e];
    if (!std::isfinite(x)) ++s.nonfinite;
    if (std::isfinite(x) != std::isfinite(r)) {
      ++s.nonfinite_mismatch;
      ++(std::isfinite(x) ? s.nonfinite_ref_only : s.nonfinite_a_only);
    }
    if (!std::isfinite(x) || !std::isfinite(r)) continue;
    dot += x * r;
    a_sq += x * x;
    ref_sq += r * r;
    err_sq += (x - r) * (x - r);
    s.max_error = std::fmax(s.max_error, std::fabs(x - r));
    s.max_abs_ref = std::fmax(s.max_abs_ref, std::fabs(r));
  }
  if (a_sq > 0 && ref_sq > 0) {
    s.cosine = dot / (std::sqrt(a_sq) * std::sqrt(ref_sq));
    s.norm_ratio = std::sqrt(a_sq / ref_sq);
    s.rel_l2 = std::sqrt(err_sq / ref_sq);
  } else if (a_sq != ref_sq) {  // one is all zero, the other not
    s.cosine = 0;
    s.norm_ratio = ref_sq > 0 ? 0 : INFINITY;
    s.rel_l2 = ref_sq > 0 ? 1 : INFINITY;
  }
  return s;
}

// A tensor viewed as [outer, rows, cols]: outer = B * heads (query or kv heads), cols = 1 for lse.
struct TensorGeometry {
  int64_t outer = 1, rows = 1, cols = 1;
  int64_t heads = 1;  // per batch, to name (b, h) from an outer index
};

// The computations a recorded tensor is judged against, flat in canonical layout.
struct RecordedComparisonInputs {
  std::string tensor;  // "o", "lse", "dq", "dk", "dv"
  TensorGeometry geometry;
  ValueReader recorded;                            // from the dump
  const std::vector<double>* reference = nullptr;  // fp64 recomputation
  ValueReader baseline;                            // unfused at the recorded precision
  // Optional: the replay's own kernel at the recorded precision, compared per head too; a
  // recorded NaN / Inf it reproduces is no mismatch.
  ValueReader same_precision;
  bool gradient = false;  // 3x rule instead of 2x
  // The precision the recording is stored in (nullopt: fp64 or wider): no element is judged
  // against an allowance below `roundings` of its ulps at the element's magnitude, the
  // rounding the recording cannot avoid (once, or once per block where the recorded kernel
  // accumulates in the stored precision: stored_roundings).
  std::optional<Precision> stored;
  int64_t roundings = 1;
};

struct HeadComparison {
  int64_t batch = 0, head = 0;
  double cosine = 1;               // recorded vs fp64 (1 when both are zero)
  double norm_ratio = 1;           // ||recorded|| / ||fp64||
  double max_error = 0;            // max |recorded - fp64| over finite pairs
  int64_t nonfinite_mismatch = 0;  // elements finite in one and not the other
  int64_t recorded_only = 0;       // non-finite in the recording, finite in fp64 (not below)
  int64_t reference_only = 0;      // finite in the recording, non-finite in fp64
  // Non-finite in the recording and, of the same class, in the replay's own kernel where fp64
  // is finite: the recorded precision's overflow, reproduced; not a mismatch.
  int64_t replay_nonfinite = 0;
  bool within_rule = true;
  std::vector<double> column_max_error;  // [cols]: this head's max error per column
  double same_precision_cosine = 1;      // recorded vs same_precision (when given)
  double same_precision_max_error = 0;
  // Rows holding an element beyond the threshold or a non-finite mismatch (-1 when none).
  int64_t bad_row_first = -1, bad_row_last = -1;
};

struct RecordedComparison {
  std::string tensor;
  double threshold = 0;       // factor * max|baseline - fp64| + floor (and >= 1 stored ulp)
  double baseline_error = 0;  // max|baseline - fp64|
  double max_error = 0;       // worst head
  std::vector<HeadComparison> heads;
  std::vector<double> column_max_error;  // [cols]: max over (outer, rows)
  bool within_rule = true;               // every head within the rule, same non-finite pattern
  int64_t finite_pairs = 0;  // elements finite in both: 0 means no value was compared at all
};

// Floor added to the accuracy-rule threshold: fp32 rounding of the largest reference value.
double accuracy_floor(double max_abs_reference);

// The precision a recording of element type `t` is stored in: f16, bf16, f32; nullopt for fp64
// (or wider), where no ulp floor applies.
std::optional<Precision> stored_precision(DType t);

// One ulp of precision `p` at magnitude |x| (the spacing of its representable values there;
// the smallest subnormal's at and below the normal range).
double storage_ulp(Precision p, double x);

RecordedComparison compare_recorded(const RecordedComparisonInputs& in);

// compare_recorded fed its fp64 reference one outer index (head) at a time, in increasing order
// (in.reference is not read): the comparison with a streamed reference (stream_reference64).
// Besides one head of the recording, the baseline and the same-precision run, it holds per row
// of each head the largest error beyond its elements' stored-ulp allowance, so that the rule's
// threshold (which needs every head's baseline error) is applied in finish().
// One head of a recording and of a same-precision run in fp64: what RecordedComparer::add reads
// them into, shared by the comparers of one feed (one head at a time).
struct HeadScratch {
  std::vector<double> recorded, same;
};

class RecordedComparer {
 public:
  explicit RecordedComparer(RecordedComparisonInputs in);
  // reference [rows, cols] of that head.
  void add(int64_t outer, const double* reference, HeadScratch& scratch);
  RecordedComparison finish();

 private:
  RecordedComparisonInputs in_;
  RecordedComparison out_;
  double max_abs_reference_ = 0;
  // [outer][row]: the row's largest error above its allowance's stored-ulp part (0 when none;
  // +inf for a non-finite mismatch), compared with the threshold in finish().
  std::vector<std::vector<double>> row_excess_;
};

}  // namespace attnscope
