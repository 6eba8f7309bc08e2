// Attention health over a training run (issue 45): the recorder's per-step statistics
// (core/health_table.h) as one series per (rank, layer, head), and the warnings that come
// before the NaN: a head's max logit growing towards the limit of the kernel's score precision
// (with the fitted trend and the predicted step of crossing it), entropy collapse, gradient
// spikes, LSE below where exp underflows in fp32.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/health_table.h"

namespace attnscope {

// One head of one attention call site over the steps; micro-batches of a step are aggregated
// (max of maxima and norms, min of minima, mean of means, sum of non-finite counts).
struct HealthSeries {
  int rank = -1;
  int64_t layer = 0;
  std::string name;  // the calling module
  int64_t head = 0;
  // Largest |logit| the kernel's scores hold before overflowing (fp16 Q K^T of an eager /
  // unfused kernel: 65504 x |scale|), and what it is ("fp16 Q K^T (eager)").
  double limit = 0;
  std::string limit_text;
  bool p_from_lse = false;  // the kernel's backward rebuilds P as exp(s - LSE) (lse_cliff)
  std::vector<int64_t> steps;
  std::vector<std::array<double, kHealthStats>> values;  // per step, indexed by HealthStat
  double at(size_t i, HealthStat s) const { return values[i][static_cast<int>(s)]; }
  // log10(limit / max |logit|) at step index i: decades left before the scores overflow
  // (negative once passed); NaN when the logit is not a positive number.
  double headroom(size_t i) const;
  std::string label() const;  // "layer 0 (model.layers.0.self_attn) head 3[, rank 1]"
};

// A fit of the max logit over a trailing window of steps: y = (a + b t)^power, or
// y = exp(a + b t) (power 0).
struct LogitTrend {
  int power = 0;
  double a = 0, b = 0;
  int64_t from_step = 0, to_step = 0;  // the window fitted
  double sigma = 0;                    // residual standard deviation of log y
  double value(double step) const;
  std::string model_text() const;  // "quadratic", "linear", "exponential"
  // Step where the trend reaches `limit` shifted by `log_shift` (in log y), or nullopt when
  // it never does.
  std::optional<double> crossing(double limit, double log_shift = 0) const;
};

struct HealthWarning {
  std::string kind;  // logit_growth, entropy_collapse, gradient_spike, lse_cliff
  // "warning": predicts a failure (logit_growth); "notice": an observation that predicts no
  // step (a head gone one-hot, a gradient spike, an LSE cliff).
  std::string severity = "notice";
  size_t series = 0;
  int64_t first_step = 0;  // first step with the data to give this warning
  int64_t step = 0;        // the step it refers to (latest data, the spike, the cliff)
  // logit_growth: predicted step of crossing the limit, its band (2 sigma of the fit), the same
  // prediction as made at first_step, and the trend; crossed: the limit was already passed.
  std::optional<int64_t> predicted_step, band_low, band_high, predicted_at_first;
  std::optional<LogitTrend> trend;
  bool crossed = false;
  bool within_horizon = false;  // a failure predicted within the horizon (or already there)
  double value = 0;             // the statistic at `step`
  std::string text;
  std::vector<std::string> remedies;
};

struct NonfiniteStep {
  int64_t step = 0;
  size_t series = 0;  // the first series (rank, layer, head order) that failed there
  // Every series of that rank and layer that failed there: with o non-finite when the forward
  // failed, else with any NaN / Inf.
  std::vector<size_t> failed_series;
  int64_t count = 0;  // NaN / Inf values of `series` there
};

struct HealthReport {
  std::vector<std::string> files;
  size_t calls = 0;
  int64_t first_step = 0, last_step = 0;
  int64_t horizon = 0;
  std::vector<HealthSeries> series;
  std::vector<HealthWarning> warnings;  // warnings, then notices; predicted failures first
  std::optional<NonfiniteStep> first_nonfinite;
  bool predicts_failure() const;  // some warning within the horizon
};

struct HealthOptions {
  int64_t horizon = 1000;  // steps ahead a predicted crossing counts as a failure warning
};

HealthReport analyze_health(const HealthTable& table, const HealthOptions& options = {});

// The series' max-logit trend fitted over the data up to index `end` (exclusive); nullopt with
// fewer than kMinTrendSteps steps or no growth.
std::optional<LogitTrend> fit_logit_trend(const HealthSeries& s, size_t end);
inline constexpr size_t kMinTrendSteps = 16;

}  // namespace attnscope
