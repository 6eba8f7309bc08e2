// The scale sweep: instrumented CPU runs per (scale, precision, mode), the longest finite run
// of scales per series, and bisection of the first finite -> non-finite transition.
#include "core/analysis/scale_sweep.h"

#include <algorithm>
#include <cmath>

namespace attnscope {
namespace {

int64_t nonfinite(const std::vector<float>& x) {
  return std::count_if(x.begin(), x.end(), [](float v) { return !std::isfinite(v); });
}

struct Runner {
  AttnParams params;
  KernelInputs kin;
  const SweepSettings& settings;

  bool stopped() const {
    return (settings.stop != nullptr && settings.stop->load()) ||
           (settings.cancelled && settings.cancelled());
  }

  SweepPoint run(double scale, Precision p, Mode mode) {
    AttnParams prm = params;
    prm.scale = scale;
    prm.precision = p;
    CpuTrace trace;
    CpuAttnOptions options;
    options.mode = mode;
    options.threads = settings.threads;
    options.trace = &trace;
    options.cancelled = [this] { return stopped(); };  // the kernels throw KernelCancelled
    const CpuAttnInputs in = kin.view();
    SweepPoint pt{scale, p, mode, 0, 0, 0, 0};
    CpuAttnResult r;
    if (settings.backward) {
      r = cpu_attention(prm, options, in);
      pt.nonfinite_grad = nonfinite(r.dq) + nonfinite(r.dk) + nonfinite(r.dv);
    } else {
      const size_t rows = static_cast<size_t>(prm.batch * prm.heads * prm.seqlen_q);
      r.o.resize(rows * static_cast<size_t>(prm.head_dim_v));
      r.lse.resize(rows);
      r.m.resize(rows);
      r.l.resize(rows);
      cpu_attention_forward(prm, options, in, {r.o.data(), r.lse.data(), r.m.data(), r.l.data()});
    }
    pt.nonfinite_o = nonfinite(r.o);
    pt.nonfinite_lse = nonfinite(r.lse);
    for (const TileStats& t : trace.forward.tiles)
      pt.max_abs_s = std::max(pt.max_abs_s, double{t.max_abs_s});
    return pt;
  }
};

// Longest run of finite points of one series (indices into `series`).
SafeRange safe_range(const std::vector<SweepPoint>& series, double case_scale, Runner& runner,
                     int refine_steps) {
  SafeRange r;
  r.precision = series.front().precision;
  r.mode = series.front().mode;
  size_t best_begin = 0, best_len = 0;
  for (size_t begin = 0; begin < series.size();) {
    size_t end = begin;
    while (end < series.size() && series[end].finite()) ++end;
    if (end - begin > best_len) {
      best_begin = begin;
      best_len = end - begin;
    }
    begin = end + 1;
  }
  r.any_finite = best_len > 0;
  if (r.any_finite) {
    r.low = series[best_begin].scale;
    r.high = series[best_begin + best_len - 1].scale;
  }
  for (size_t n = 0; n + 1 < series.size(); ++n) {
    if (!series[n].finite() || series[n + 1].finite()) continue;
    double lo = series[n].scale, hi = series[n + 1].scale;  // finite at lo, not at hi
    for (int step = 0; step < refine_steps && !runner.stopped(); ++step) {
      const double mid = std::sqrt(lo * hi);
      (runner.run(mid, r.precision, r.mode).finite() ? lo : hi) = mid;
    }
    r.threshold = hi;
    break;
  }
  r.case_scale_finite = runner.run(case_scale, r.precision, r.mode).finite();
  return r;
}

}  // namespace

Result<ScaleSweep> scale_sweep(const CaseData& data, const SweepSettings& settings) {
  Result<CaseInputs> made = make_case_inputs(data, settings.run, InputValues::none);
  if (!made) return made.error();
  const CaseInputs& in = *made;
  ScaleSweep sweep;
  sweep.case_scale = in.params.scale;
  const double lo = settings.scale_min > 0 ? settings.scale_min : sweep.case_scale / 64;
  const double hi = settings.scale_max > 0 ? settings.scale_max : sweep.case_scale * 64;
  if (!(lo > 0) || !(hi >= lo) || !std::isfinite(hi) || settings.points < 1) {
    return make_error(ErrorCode::invalid_argument,
                      "scale sweep: invalid range " + std::to_string(lo) + ":" +
                          std::to_string(hi) + ":" + std::to_string(settings.points),
                      "use 0 < MIN <= MAX and at least one point, e.g. --scales 0.01:10:25");
  }
  for (int n = 0; n < settings.points; ++n) {
    const double t = settings.points == 1 ? 0.0 : static_cast<double>(n) / (settings.points - 1);
    sweep.scales.push_back(lo * std::pow(hi / lo, t));
  }
  Runner runner{in.params, KernelInputs(data), settings};
  try {
    for (double s : sweep.scales) {
      for (Precision p : settings.precisions) {
        for (Mode m : settings.modes) {
          if (runner.stopped()) {
            sweep.interrupted = true;
            return sweep;
          }
          sweep.points.push_back(runner.run(s, p, m));
        }
      }
    }
    const size_t per_scale = settings.precisions.size() * settings.modes.size();
    for (size_t series = 0; series < per_scale && !runner.stopped(); ++series) {
      std::vector<SweepPoint> points;
      for (size_t n = series; n < sweep.points.size(); n += per_scale)
        points.push_back(sweep.points[n]);
      sweep.ranges.push_back(safe_range(points, sweep.case_scale, runner, settings.refine_steps));
    }
  } catch (const KernelCancelled&) {
    // A run stopped inside its kernels: the points before it stand.
  }
  if (runner.stopped()) {  // a bisection was cut short: its threshold is not trustworthy
    sweep.interrupted = true;
    sweep.ranges.clear();
  }
  return sweep;
}

}  // namespace attnscope
