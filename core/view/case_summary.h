// Case-level numbers for the findings list and the overview heatmaps (plain C++, no Qt): the
// findings of analyze_case at the GUI's settings, a metric per (batch, head) (non-finite
// count, max |S|, min LSE, max row max, gradient norms ||dQ||, ||dK||, ||dV|| and
// ||(dQ, dK, dV)||) and the same metrics aggregated per case for the (step x layer) overview
// and the timeline of multi-step dumps.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/case_analysis.h"
#include "core/case_model.h"
#include "core/result.h"

namespace attnscope {

// grad_norm is ||dQ||; dk_norm / dv_norm are the norms of the KV head a query head reads (its
// GQA group shares them); grad_total is ||(dQ, dK, dV)||, the 2-norm clip_grad_norm_ uses.
enum class Metric : uint8_t {
  nonfinite,
  max_abs_s,
  min_lse,
  max_row_max,
  grad_norm,
  dk_norm,
  dv_norm,
  grad_total
};
inline constexpr int kMetricCount = 8;
inline constexpr Metric kAllMetrics[kMetricCount] = {
    Metric::nonfinite, Metric::max_abs_s, Metric::min_lse, Metric::max_row_max,
    Metric::grad_norm, Metric::dk_norm,   Metric::dv_norm, Metric::grad_total};
const char* metric_name(Metric m);  // "non-finite count", "max |S|", ..., "||(dQ,dK,dV)||"

// One value per (batch, head) and metric; NaN where a head has no finite value to report.
struct HeadMetrics {
  int64_t batch = 0, heads = 0, kv_heads = 0;
  std::vector<double> values[kMetricCount];  // [metric][b * heads + h]
  std::vector<double> dk_kv, dv_kv;          // [b * kv_heads + g]: ||dK||, ||dV|| per KV head

  double at(Metric m, int64_t b, int64_t h) const {
    return values[static_cast<int>(m)][static_cast<size_t>(b * heads + h)];
  }
  // The case's value: sum of non-finite counts, max of max |S| / max row max, min of min LSE,
  // the case's ||dQ||, ||dK||, ||dV|| (each KV head counted once) and ||(dQ, dK, dV)||.
  double aggregate(Metric m) const;
};

// Metrics of one run. The trace must come from the same run (for max |S|).
HeadMetrics head_metrics(const AttnParams& params, const CpuAttnResult& out, const CpuTrace& trace);

// The run choice left empty replays each case's recorded run (core/replay.h): its modes, so the
// findings are those `attnscope-cli scan` gives for the same choice.
struct SummarySettings {
  RunChoice run;
  int threads = 0;
  // Polled between the analysis phases (thread-safe); once true the call fails with "cancelled".
  std::function<bool()> cancelled;
};

struct CaseSummary {
  std::string case_path;
  Precision precision = Precision::f32;
  Mode mode = Mode::fused;        // the run the metrics are of: the one shown (summary_mode)
  bool upcast = false;            // the run was SDPA MATH's upcast
  std::string judged_under;       // CaseAnalysis::judged_under: as recorded or what-if
  InferredRun inferred;           // what the analysis inferred where the dump is silent
  std::string what_if_explains;   // what_if_explains_text: what the what-if reproduces
  std::vector<Finding> findings;  // errors first
  HeadMetrics metrics;
  // The run's clip_grad_norm_ calls (set with clip_norm): one for the whole case, else one per
  // (batch, kv head) in that order (clip_case_gradients).
  std::vector<ClipResult> clips;
  // The largest |q.k| before scaling over the heads the score check scanned (those at risk of
  // overflow); absent when none was.
  std::optional<double> max_abs_qk;
};

// analyze_case in one mode at the settings, then the metrics of that run.
Result<CaseSummary> summarize_case(const CaseData& data, const SummarySettings& settings);

// The case-level metrics only (one instrumented CPU run, no fp64 reference): what each cell
// of the (step x layer) overview needs.
Result<HeadMetrics> case_metrics(const CaseData& data, const SummarySettings& settings);

}  // namespace attnscope
