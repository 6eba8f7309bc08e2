// Backend matrix: one case through every registered kernel variant (core/kernel_registry.h) at
// every precision, compared with the fp64 recomputation: finite-ness, max error, cosine and
// the accuracy rule per output, so the user sees which backend / precision breaks. Unsupported
// combinations stay in the table with the registry's reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/recorded_check.h"
#include "core/case_inputs.h"
#include "core/case_model.h"
#include "core/kernel_registry.h"
#include "core/result.h"

namespace attnscope {

struct MatrixSettings {
  RunChoice run;  // its scale and mask fill; the precision is swept
  std::vector<Precision> precisions = {Precision::f64, Precision::f32, Precision::f16,
                                       Precision::bf16};
  // The registry's materialising "reference" variant runs only up to this B * H * Sq * Sk.
  int64_t materialise_budget = int64_t{1} << 22;
  int threads = 0;
};

// One output of a run against fp64.
struct TensorAccuracy {
  std::string tensor;    // "o", "lse", "dq", "dk", "dv"
  PairStats stats;       // vs fp64
  double threshold = 0;  // max error the accuracy rule allows
  // False when the rule cannot be applied: the baseline (cpu-unfused at that precision) is
  // non-finite where fp64 is finite or did not run; within_rule is then true.
  bool rule_applied = true;
  bool within_rule = true;
};

struct MatrixRow {
  std::string variant, backend;
  std::string semantics;  // the numerics the variant runs (KernelVariant::semantics)
  Precision precision = Precision::f32;
  Mode mode = Mode::fused;
  bool supported = true;
  std::string reason;  // why not supported
  bool ran = false;
  std::string error;        // why a supported run failed
  bool finite = true;       // every output finite
  bool within_rule = true;  // every output whose rule applies is within it
  std::vector<TensorAccuracy> tensors;
};

struct BackendMatrix {
  std::string rule;  // how the accuracy rule was applied, for the report
  // What the fp64 oracle computed: the case's mask fill, backward P source and dropout (the
  // replay of the recorded run unless settings say otherwise).
  std::string oracle;
  std::vector<MatrixRow> rows;
};

// Fails only when the case cannot be turned into kernel inputs.
Result<BackendMatrix> backend_matrix(const CaseData& data, const MatrixSettings& settings);

}  // namespace attnscope
