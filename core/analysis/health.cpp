// analyze_health: series per (rank, layer, head) from the recorded statistics, the score limit
// of each call site's kernel, trend fits of the max logit and the warnings (health.h).
#include "core/analysis/health.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/replay.h"
#include "kernels/attn_names.h"

namespace attnscope {
namespace {

constexpr double kFp16Max = 65504.0;
constexpr double kBf16Max = 3.3895313892515355e38;
constexpr double kFp32Max = 3.4028234663852886e38;
// ln(FLT_MIN): a row whose LSE is below this has every exp(s - 0) underflow in fp32.
constexpr double kExpUnderflowLse = -87.336544750553102;
// Entropy collapse: the head's mean row entropy fell below this share of its early level
// while nearly every row puts > 0.99 of its weight on one key.
constexpr double kEntropyCollapseShare = 0.1;
constexpr double kDominantRows = 0.8;
// A head's crossing is predicted once its max logit is within this factor of the limit: far
// below it, early training's fast growth extrapolates to crossings that never come.
constexpr double kPredictionHeadroom = 10.0;
// Gradient spike: a norm this many times the median of the steps before it.
constexpr double kSpikeFactor = 10.0;
constexpr size_t kSpikeHistory = 32;

enum class Combine { max, min, mean, sum };

Combine combine_of(HealthStat s) {
  switch (s) {
    case HealthStat::min_lse:
    case HealthStat::min_entropy:
      return Combine::min;
    case HealthStat::mean_entropy:
    case HealthStat::dominant_share:
      return Combine::mean;
    case HealthStat::nonfinite:
      return Combine::sum;
    default:
      return Combine::max;
  }
}

Replay replay_of_call(const HealthCall& c) {
  CaseConfig config;
  config.dtype = c.dtype;
  config.run.backend = c.backend;
  config.run.device = c.device;
  config.run.autocast_dtype = c.autocast_dtype;
  return replay_of(config, false);
}

// Score limit of a call site: (largest |logit|, what it is).
std::pair<double, std::string> score_limit(const HealthCall& c) {
  const Replay r = replay_of_call(c);
  const bool unfused =
      std::find(r.modes.begin(), r.modes.end(), Mode::unfused) != r.modes.end() && !r.upcast;
  const double scale = c.scale != 0 ? std::fabs(c.scale) : 1.0;
  const std::string kernel = c.backend.empty() ? "backend not recorded" : c.backend;
  if (!unfused) {
    return {kFp32Max * scale, "fp32 scores (" + kernel + ")"};
  }
  const bool fp16 = r.precision == Precision::f16;
  const double max = fp16 ? kFp16Max : r.precision == Precision::bf16 ? kBf16Max : kFp32Max;
  std::string text = std::string(precision_name(r.precision)) + " Q K^T (" + kernel + ")";
  if (!r.backend_known) text += ", if the kernel materialises the scores";
  return {max * scale, text};
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

std::vector<HealthSeries> build_series(const HealthTable& table) {
  std::vector<HealthSeries> out;
  std::map<std::tuple<int, int64_t, int64_t>, size_t> index;
  std::vector<std::vector<int>> counts;  // micro-batches aggregated into each step so far
  for (const HealthCall& c : table.calls) {
    for (int64_t h = 0; h < c.heads; ++h) {
      const auto key = std::make_tuple(c.rank, c.layer, h);
      auto found = index.find(key);
      if (found == index.end()) {
        found = index.emplace(key, out.size()).first;
        HealthSeries s;
        s.rank = c.rank;
        s.layer = c.layer;
        s.name = c.name;
        s.head = h;
        std::tie(s.limit, s.limit_text) = score_limit(c);
        s.p_from_lse = replay_of_call(c).backward_p == BackwardP::from_lse;
        out.push_back(std::move(s));
        counts.emplace_back();
      }
      HealthSeries& s = out[found->second];
      const HealthHead& head = table.heads[c.first_head + static_cast<size_t>(h)];
      std::array<double, kHealthStats> v{};
      for (int k = 0; k < kHealthStats; ++k) v[k] = head.values[k];
      if (s.steps.empty() || s.steps.back() != c.step) {
        s.steps.push_back(c.step);
        s.values.push_back(v);
        counts[found->second].push_back(1);
        continue;
      }
      std::array<double, kHealthStats>& into = s.values.back();
      int& n = counts[found->second].back();
      for (int k = 0; k < kHealthStats; ++k) {
        switch (combine_of(static_cast<HealthStat>(k))) {
          case Combine::max:
            into[k] = std::fmax(into[k], v[k]);
            break;
          case Combine::min:
            into[k] = std::fmin(into[k], v[k]);
            break;
          case Combine::mean:
            into[k] = (into[k] * n + v[k]) / (n + 1);
            break;
          case Combine::sum:
            into[k] += v[k];
            break;
        }
      }
      ++n;
    }
  }
  return out;
}

std::string number_text(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", x);
  return buffer;
}

const std::vector<std::string>& logit_remedies() {
  static const std::vector<std::string> kRemedies = {
      "qk-layernorm: normalise q and k per head before the dot product (Dehghani et al. 2023, "
      "Wortsman et al. 2023)",
      "QK-clip: rescale W_q and W_k of a head whose max logit passes a threshold (MuonClip)",
      "sigmaReparam: spectral reparametrisation of the attention weights (Zhai et al. 2023)",
      "lower the learning rate or lengthen the warm-up",
      "compute the scores in fp32: a fused kernel (SDPA flash / efficient) or an upcast "
      "before Q K^T",
      "bf16 instead of fp16: 8 exponent bits, max 3.4e38"};
  return kRemedies;
}

// The logit_growth warning of one series, or nullopt.
std::optional<HealthWarning> logit_growth(const HealthReport& report, size_t index) {
  const HealthSeries& s = report.series[index];
  const size_t n = s.steps.size();
  size_t end = n;  // data up to the crossing, when the limit was passed
  for (size_t i = 0; i < n; ++i) {
    if (s.at(i, HealthStat::max_abs_logit) >= s.limit) {
      end = i;
      break;
    }
  }
  const bool crossed = end < n;
  // The first prefix whose trend predicts a crossing within the horizon.
  const auto predicts = [&](size_t e) -> std::optional<double> {
    if (!(s.at(e - 1, HealthStat::max_abs_logit) >= s.limit / kPredictionHeadroom)) {
      return std::nullopt;
    }
    const std::optional<LogitTrend> t = fit_logit_trend(s, e);
    if (!t) return std::nullopt;
    const std::optional<double> at = t->crossing(s.limit);
    if (!at || *at > static_cast<double>(s.steps[e - 1] + report.horizon)) return std::nullopt;
    return at;
  };
  std::optional<int64_t> first_step, predicted_at_first;
  const size_t stride = std::max<size_t>(1, end / 400);
  for (size_t e = kMinTrendSteps; e <= end; e += stride) {
    if (const std::optional<double> at = predicts(e)) {
      first_step = s.steps[e - 1];
      predicted_at_first = std::llround(*at);
      break;
    }
  }
  if (!crossed && !first_step) return std::nullopt;
  const std::optional<LogitTrend> trend = fit_logit_trend(s, end);
  HealthWarning w;
  w.kind = "logit_growth";
  w.severity = "warning";
  w.series = index;
  w.crossed = crossed;
  w.step = crossed ? s.steps[end] : s.steps[n - 1];
  w.first_step = first_step.value_or(w.step);
  w.predicted_at_first = predicted_at_first;
  w.value = s.at(crossed ? end : n - 1, HealthStat::max_abs_logit);
  w.trend = trend;
  if (crossed) {
    w.predicted_step = s.steps[end];
  } else if (trend) {
    if (auto at = trend->crossing(s.limit)) w.predicted_step = std::llround(*at);
    if (auto at = trend->crossing(s.limit, 2 * trend->sigma)) w.band_low = std::llround(*at);
    if (auto at = trend->crossing(s.limit, -2 * trend->sigma)) w.band_high = std::llround(*at);
  }
  w.within_horizon =
      crossed || (w.predicted_step && *w.predicted_step <= s.steps[n - 1] + report.horizon);
  w.text =
      s.label() + ": max |logit| " + number_text(w.value) + " at step " + std::to_string(w.step);
  if (crossed) {
    w.text += " passed the limit " + number_text(s.limit) + " of the " + s.limit_text;
  } else {
    w.text += ", limit " + number_text(s.limit) + " (" + s.limit_text + ")";
    if (w.predicted_step) {
      w.text += "; " + (trend ? trend->model_text() : std::string("the")) +
                " growth reaches it around step " + std::to_string(*w.predicted_step);
      if (w.band_low && w.band_high) {
        w.text += " (" + std::to_string(*w.band_low) + " to " + std::to_string(*w.band_high) + ")";
      }
    }
  }
  if (first_step) {
    w.text += "; warned from step " + std::to_string(*first_step) + ", which predicted step " +
              std::to_string(*predicted_at_first);
  }
  w.remedies = logit_remedies();
  return w;
}

std::optional<HealthWarning> entropy_collapse(const HealthReport& report, size_t index) {
  const HealthSeries& s = report.series[index];
  const size_t n = s.steps.size();
  if (n < 2 * kMinTrendSteps) return std::nullopt;
  std::vector<double> early;
  for (size_t i = 0; i < std::max(kMinTrendSteps, n / 10); ++i) {
    const double e = s.at(i, HealthStat::mean_entropy);
    if (std::isfinite(e)) early.push_back(e);
  }
  const double level = median(early);
  if (!(level > 0)) return std::nullopt;
  constexpr size_t kWindow = 5;
  for (size_t i = kWindow; i <= n; ++i) {
    std::vector<double> entropy, dominant;
    for (size_t j = i - kWindow; j < i; ++j) {
      entropy.push_back(s.at(j, HealthStat::mean_entropy));
      dominant.push_back(s.at(j, HealthStat::dominant_share));
    }
    const double e = median(entropy), d = median(dominant);
    if (!(e < kEntropyCollapseShare * level && d > kDominantRows)) continue;
    HealthWarning w;
    w.kind = "entropy_collapse";
    w.series = index;
    w.first_step = w.step = s.steps[i - 1];
    w.value = e;
    w.text = s.label() + ": mean attention entropy " + number_text(e) + " nats at step " +
             std::to_string(w.step) + ", from " + number_text(level) + " early in the run; " +
             number_text(100 * d) + " % of rows put > 0.99 of their weight on one key";
    w.remedies = {"sigmaReparam (Zhai et al. 2023: entropy collapse)",
                  "qk-layernorm: bounds the logits that sharpen the softmax",
                  "lower the learning rate or lengthen the warm-up"};
    return w;
  }
  return std::nullopt;
}

void gradient_spikes(const HealthReport& report, size_t index, std::vector<HealthWarning>& out) {
  const HealthSeries& s = report.series[index];
  for (HealthStat stat :
       {HealthStat::norm_do, HealthStat::norm_dq, HealthStat::norm_dk, HealthStat::norm_dv}) {
    std::vector<double> history;
    for (size_t i = 0; i < s.steps.size(); ++i) {
      const double x = s.at(i, stat);
      if (!std::isfinite(x)) continue;
      if (history.size() >= kMinTrendSteps) {
        const double typical = median(std::vector<double>(
            history.end() - static_cast<std::ptrdiff_t>(std::min(history.size(), kSpikeHistory)),
            history.end()));
        if (typical > 0 && x > kSpikeFactor * typical) {
          HealthWarning w;
          w.kind = "gradient_spike";
          w.series = index;
          w.first_step = w.step = s.steps[i];
          w.value = x;
          w.text = s.label() + ": ||" + std::string(health_stat_name(stat)).substr(5) +
                   "|| = " + number_text(x) + " at step " + std::to_string(w.step) + ", " +
                   number_text(x / typical) + "x the median of the steps before it";
          w.remedies = {"lower the learning rate or lengthen the warm-up",
                        "clip the gradient norm (torch.nn.utils.clip_grad_norm_)",
                        "look at the batch of that step: a data outlier spikes the gradients "
                        "of every layer at once"};
          out.push_back(std::move(w));
          break;  // the first spike of each norm
        }
      }
      history.push_back(x);
    }
  }
}

std::optional<HealthWarning> lse_cliff(const HealthReport& report, size_t index) {
  const HealthSeries& s = report.series[index];
  if (!s.p_from_lse) return std::nullopt;
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const double lse = s.at(i, HealthStat::min_lse);
    if (!(lse < kExpUnderflowLse)) continue;
    HealthWarning w;
    w.kind = "lse_cliff";
    w.series = index;
    w.first_step = w.step = s.steps[i];
    w.value = lse;
    w.text = s.label() + ": a row's LSE is " + number_text(lse) + " at step " +
             std::to_string(w.step) +
             ", below ln(FLT_MIN) = -87.34 where exp underflows in "
             "fp32: kernels that rebuild P as exp(s - LSE) in fp32 lose such rows (the cuDNN "
             "tail-mask NaN)";
    w.remedies = {"mask with -inf or a bool mask instead of a large negative bias",
                  "another SDPA backend for these masks (flash or efficient instead of cuDNN)",
                  "keep the softmax statistics in fp32"};
    return w;
  }
  return std::nullopt;
}

// First step with a NaN / Inf: the series whose forward failed there (o non-finite) in the
// earliest layer, else the first with any.
std::optional<NonfiniteStep> first_nonfinite(const std::vector<HealthSeries>& series) {
  // Per series: the index of its first non-finite step, or npos.
  std::vector<size_t> first(series.size(), std::string::npos);
  const auto forward_failed = [&](size_t k) {
    return !std::isfinite(series[k].at(first[k], HealthStat::max_abs_o));
  };
  std::optional<size_t> best;
  for (size_t k = 0; k < series.size(); ++k) {
    const HealthSeries& s = series[k];
    for (size_t i = 0; i < s.steps.size() && first[k] == std::string::npos; ++i) {
      if (s.at(i, HealthStat::nonfinite) > 0) first[k] = i;
    }
    if (first[k] == std::string::npos) continue;
    const int64_t step = s.steps[first[k]];
    const int64_t best_step = best ? series[*best].steps[first[*best]] : 0;
    if (!best || step < best_step ||
        (step == best_step && forward_failed(k) && !forward_failed(*best))) {
      best = k;
    }
  }
  if (!best) return std::nullopt;
  NonfiniteStep out;
  out.series = *best;
  out.step = series[*best].steps[first[*best]];
  out.count = static_cast<int64_t>(series[*best].at(first[*best], HealthStat::nonfinite));
  for (size_t k = 0; k < series.size(); ++k) {
    if (first[k] != std::string::npos && series[k].steps[first[k]] == out.step &&
        series[k].rank == series[*best].rank && series[k].layer == series[*best].layer &&
        forward_failed(k) == forward_failed(*best)) {
      out.failed_series.push_back(k);
    }
  }
  return out;
}

}  // namespace

std::string HealthSeries::label() const {
  std::string out = "layer " + std::to_string(layer);
  if (!name.empty()) out += " (" + name + ")";
  out += " head " + std::to_string(head);
  if (rank >= 0) out += ", rank " + std::to_string(rank);
  return out;
}

double HealthSeries::headroom(size_t i) const {
  const double logit = at(i, HealthStat::max_abs_logit);
  return logit > 0 ? std::log10(limit / logit) : NAN;
}

double LogitTrend::value(double step) const {
  const double z = a + b * step;
  if (power == 0) return std::exp(z);
  return z <= 0 ? 0.0 : std::pow(z, power);
}

std::string LogitTrend::model_text() const {
  return power == 0 ? "exponential" : power == 1 ? "linear" : "quadratic";
}

std::optional<double> LogitTrend::crossing(double limit, double log_shift) const {
  if (!(b > 0) || !(limit > 0)) return std::nullopt;
  const double target = std::log(limit) - log_shift;
  const double z = power == 0 ? target : std::exp(target / power);
  const double t = (z - a) / b;
  return std::isfinite(t) ? std::optional<double>(std::max(t, static_cast<double>(to_step)))
                          : std::nullopt;
}

std::optional<LogitTrend> fit_logit_trend(const HealthSeries& s, size_t end) {
  end = std::min(end, s.steps.size());
  const size_t window = std::max(kMinTrendSteps, end / 3);
  std::vector<double> t, y;
  for (size_t i = end > window ? end - window : 0; i < end; ++i) {
    const double v = s.at(i, HealthStat::max_abs_logit);
    if (std::isfinite(v) && v > 0) {
      t.push_back(static_cast<double>(s.steps[i]));
      y.push_back(v);
    }
  }
  const size_t n = t.size();
  if (n < kMinTrendSteps) return std::nullopt;
  // The model kept: the least sum of squared log residuals.
  std::optional<LogitTrend> best;
  double best_ssr = INFINITY;
  for (int power : {0, 1, 2}) {
    // Least squares of z = transform(y) on t.
    double st = 0, sz = 0, stt = 0, stz = 0;
    for (size_t i = 0; i < n; ++i) {
      const double z = power == 0 ? std::log(y[i]) : std::pow(y[i], 1.0 / power);
      st += t[i];
      sz += z;
      stt += t[i] * t[i];
      stz += t[i] * z;
    }
    const double den = n * stt - st * st;
    if (!(den > 0)) return std::nullopt;
    LogitTrend f;
    f.power = power;
    f.b = (n * stz - st * sz) / den;
    f.a = (sz - f.b * st) / n;
    f.from_step = static_cast<int64_t>(t.front());
    f.to_step = static_cast<int64_t>(t.back());
    double ssr = 0;
    for (size_t i = 0; i < n; ++i) {
      const double fitted = f.value(t[i]);
      const double r = fitted > 0 ? std::log(fitted) - std::log(y[i]) : INFINITY;
      ssr += r * r;
    }
    f.sigma = std::sqrt(ssr / static_cast<double>(n - 2));
    if (ssr < best_ssr) {
      best_ssr = ssr;
      best = f;
    }
  }
  // Growth beyond the noise: the fitted rise over the window exceeds 2 sigma of log y.
  if (!best || !(best->b > 0)) return std::nullopt;
  const double rise = std::log(best->value(static_cast<double>(best->to_step))) -
                      std::log(std::max(best->value(static_cast<double>(best->from_step)), 1e-300));
  if (!(rise > 2 * best->sigma)) return std::nullopt;
  return best;
}

bool HealthReport::predicts_failure() const {
  return std::any_of(warnings.begin(), warnings.end(),
                     [](const HealthWarning& w) { return w.within_horizon; });
}

HealthReport analyze_health(const HealthTable& table, const HealthOptions& options) {
  HealthReport r;
  r.files = table.files;
  r.calls = table.calls.size();
  r.horizon = options.horizon;
  r.series = build_series(table);
  for (const HealthCall& c : table.calls) {
    if (&c == &table.calls.front() || c.step < r.first_step) r.first_step = c.step;
    if (&c == &table.calls.front() || c.step > r.last_step) r.last_step = c.step;
  }
  for (size_t k = 0; k < r.series.size(); ++k) {
    if (auto w = logit_growth(r, k)) r.warnings.push_back(std::move(*w));
    if (auto w = entropy_collapse(r, k)) r.warnings.push_back(std::move(*w));
    gradient_spikes(r, k, r.warnings);
    if (auto w = lse_cliff(r, k)) r.warnings.push_back(std::move(*w));
  }
  // Predicted failures first, soonest first; then the rest by step.
  std::stable_sort(r.warnings.begin(), r.warnings.end(),
                   [](const HealthWarning& a, const HealthWarning& b) {
                     if (a.severity != b.severity) return a.severity == "warning";
                     if (a.within_horizon != b.within_horizon) return a.within_horizon;
                     const int64_t x = a.predicted_step.value_or(a.step);
                     const int64_t y = b.predicted_step.value_or(b.step);
                     return x != y ? x < y : a.first_step < b.first_step;
                   });
  r.first_nonfinite = first_nonfinite(r.series);
  return r;
}

}  // namespace attnscope
