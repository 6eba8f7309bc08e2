// Compares outputs recorded from the real run (o, lse, dq, dk, dv in the dump) with
// attnscope's recomputation: per-head cosine similarity, norm ratio, max error against the
// accuracy rule of DESIGN §3, and a per-column (head-dim) error profile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope {

// A tensor viewed as [outer, rows, cols]: outer = B * heads (query or kv heads), cols = 1 for lse.
struct TensorGeometry {
  int64_t outer = 1, rows = 1, cols = 1;
  int64_t heads = 1;  // per batch, to name (b, h) from an outer index
};

// The three computations a recorded tensor is judged against, flat in canonical layout.
struct RecordedComparisonInputs {
  std::string tensor;               // "o", "lse", "dq", "dk", "dv"
  TensorGeometry geometry;
  const std::vector<double>* recorded = nullptr;   // from the dump
  const std::vector<double>* reference = nullptr;  // fp64 recomputation
  const std::vector<double>* baseline = nullptr;   // unfused at the recorded precision
  bool gradient = false;                           // 3x rule instead of 2x
};

struct HeadComparison {
  int64_t batch = 0, head = 0;
  double cosine = 1;      // recorded vs fp64 (1 when both are zero)
  double norm_ratio = 1;  // ||recorded|| / ||fp64||
  double max_error = 0;   // max |recorded - fp64| over finite pairs
  int64_t nonfinite_mismatch = 0;  // elements finite in one and not the other
  bool within_rule = true;
};

struct RecordedComparison {
  std::string tensor;
  double threshold = 0;  // factor * max|baseline - fp64| + floor
  double max_error = 0;  // worst head
  std::vector<HeadComparison> heads;
  std::vector<double> column_max_error;  // [cols]: max over (outer, rows)
  bool within_rule = true;               // every head within the rule, same non-finite pattern
};

// Floor added to the accuracy-rule threshold: fp32 rounding of the largest reference value.
double accuracy_floor(double max_abs_reference);

RecordedComparison compare_recorded(const RecordedComparisonInputs& in);

}  // namespace attnscope
