// Findings and per-head metrics of a case (see case_summary.h).
#include "core/view/case_summary.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnscope {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

int64_t count_nonfinite(const std::vector<float>& x, int64_t begin, int64_t n) {
  int64_t c = 0;
  for (int64_t e = begin; e < begin + n; ++e) c += !std::isfinite(x[static_cast<size_t>(e)]);
  return c;
}

// min / max over finite values of x[begin, begin + n); NaN when none is finite.
double finite_extreme(const std::vector<float>& x, int64_t begin, int64_t n, bool want_max) {
  double best = kNaN;
  for (int64_t e = begin; e < begin + n; ++e) {
    const float v = x[static_cast<size_t>(e)];
    if (!std::isfinite(v)) continue;
    if (std::isnan(best) || (want_max ? v > best : v < best)) best = v;
  }
  return best;
}

// 2-norm of x[begin, begin + n), accumulated in double.
double norm2(const std::vector<float>& x, int64_t begin, int64_t n) {
  double sum = 0;
  for (int64_t e = begin; e < begin + n; ++e) {
    const double v = x[static_cast<size_t>(e)];
    sum += v * v;
  }
  return std::sqrt(sum);
}

Error cancelled_error(const CaseData& data) {
  return {ErrorCode::invalid_argument, data.info.path + ": analysis cancelled", ""};
}

}  // namespace

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::nonfinite:
      return "non-finite count";
    case Metric::max_abs_s:
      return "max |S|";
    case Metric::min_lse:
      return "min LSE";
    case Metric::max_row_max:
      return "max row max";
    case Metric::grad_norm:
      return "||dQ||";
    case Metric::dk_norm:
      return "||dK||";
    case Metric::dv_norm:
      return "||dV||";
    case Metric::grad_total:
      return "||(dQ,dK,dV)||";
  }
  return "?";
}

double HeadMetrics::aggregate(Metric m) const {
  const auto norm = [](const std::vector<double>& v) {
    double acc = 0;
    for (double x : v) acc += x * x;
    return std::sqrt(acc);
  };
  switch (m) {
    case Metric::grad_norm:
      return norm(values[static_cast<int>(m)]);
    case Metric::dk_norm:
      return norm(dk_kv);
    case Metric::dv_norm:
      return norm(dv_kv);
    case Metric::grad_total:
      return std::hypot(norm(values[static_cast<int>(Metric::grad_norm)]), norm(dk_kv),
                        norm(dv_kv));
    default:
      break;
  }
  const std::vector<double>& v = values[static_cast<int>(m)];
  double acc = m == Metric::nonfinite ? 0.0 : kNaN;
  for (double x : v) {
    if (m == Metric::nonfinite) {
      acc += x;
    } else if (!std::isnan(x) && (std::isnan(acc) || (m == Metric::min_lse ? x < acc : x > acc))) {
      acc = x;
    }
  }
  return acc;
}

HeadMetrics head_metrics(const AttnParams& p, const CpuAttnResult& out, const CpuTrace& trace) {
  HeadMetrics hm;
  hm.batch = p.batch;
  hm.heads = p.heads;
  const size_t n = static_cast<size_t>(p.batch * p.heads);
  for (auto& v : hm.values) v.assign(n, kNaN);
  hm.kv_heads = p.kv_heads;
  const int64_t sq = p.seqlen_q;
  // ||dK||, ||dV|| of each KV head [B, Hk, Sk, D] / [B, Hk, Sk, Dv].
  for (int64_t bg = 0; bg < p.batch * p.kv_heads; ++bg) {
    hm.dk_kv.push_back(norm2(out.dk, bg * p.seqlen_k * p.head_dim, p.seqlen_k * p.head_dim));
    hm.dv_kv.push_back(norm2(out.dv, bg * p.seqlen_k * p.head_dim_v, p.seqlen_k * p.head_dim_v));
  }
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t bh = b * p.heads + h;
      const size_t e = static_cast<size_t>(bh);
      hm.values[0][e] =
          static_cast<double>(count_nonfinite(out.o, bh * sq * p.head_dim_v, sq * p.head_dim_v) +
                              count_nonfinite(out.lse, bh * sq, sq) +
                              count_nonfinite(out.dq, bh * sq * p.head_dim, sq * p.head_dim));
      double max_s = kNaN;
      if (trace.forward.valid) {
        for (int64_t qt = 0; qt < trace.q_tiles; ++qt) {
          for (int64_t kt = 0; kt < trace.kv_tiles; ++kt) {
            const TileStats& t =
                trace.forward.tiles[static_cast<size_t>(trace.tile_index(b, h, qt, kt))];
            if (t.computed && (std::isnan(max_s) || t.max_abs_s > max_s)) max_s = t.max_abs_s;
          }
        }
      }
      hm.values[1][e] = max_s;
      hm.values[2][e] = finite_extreme(out.lse, bh * sq, sq, false);
      hm.values[3][e] = finite_extreme(out.m, bh * sq, sq, true);
      const size_t kv = static_cast<size_t>(b * p.kv_heads + p.kv_head_of(h));
      const double dq = norm2(out.dq, bh * sq * p.head_dim, sq * p.head_dim);
      hm.values[4][e] = dq;
      hm.values[5][e] = hm.dk_kv[kv];
      hm.values[6][e] = hm.dv_kv[kv];
      hm.values[7][e] = std::hypot(dq, hm.dk_kv[kv], hm.dv_kv[kv]);
    }
  }
  return hm;
}

namespace {

// The run a summary's metrics are of: the chosen mode, else the replay's first (with its
// upcast).
std::pair<Mode, bool> summary_mode(const CaseData& data, const SummarySettings& settings) {
  if (const std::optional<Mode> m = settings.run.mode()) return {*m, settings.run.upcast};
  const Replay r = replay_of(data.info.config, data.find("dropout_mask") != nullptr);
  return {r.modes.front(), r.upcast};
}

}  // namespace

Result<CaseSummary> summarize_case(const CaseData& data, const SummarySettings& settings) {
  const auto [mode, upcast] = summary_mode(data, settings);
  AnalysisSettings a;
  a.run = settings.run;
  a.threads = settings.threads;
  a.cancelled = settings.cancelled;
  Result<CaseAnalysis> analysis = analyze_case(data, a);
  if (!analysis) return analysis.error();
  if (analysis->interrupted) return cancelled_error(data);
  const ModeRun* run = analysis->run(mode);
  CaseSummary s;
  s.case_path = data.info.path;
  s.mode = mode;
  s.upcast = upcast;
  s.judged_under = analysis->judged_under;
  s.inferred = analysis->replay.inferred;
  s.what_if_explains = what_if_explains_text(*analysis);
  s.findings = std::move(analysis->findings);
  if (run != nullptr) {
    s.precision = run->precision;
    s.metrics = head_metrics(analysis->params, run->out, run->trace);
  }
  for (const ClipReport& c : analysis->clips) {
    if (c.mode == mode) s.clips = c.clips;  // the shown run's clip calls
  }
  s.max_abs_qk = analysis->stats.max_abs_qk;
  return s;
}

Result<HeadMetrics> case_metrics(const CaseData& data, const SummarySettings& settings) {
  Result<CaseInputs> in = make_case_inputs(data, settings.run, InputValues::none);
  if (!in) return in.error();
  if (settings.cancelled && settings.cancelled()) return cancelled_error(data);
  const auto [mode, upcast] = summary_mode(data, settings);
  if (upcast) in->params.precision = Precision::f32;  // SDPA MATH computes in fp32
  const KernelInputs kin(data);
  CpuTrace trace;
  CpuAttnOptions options;
  options.mode = mode;
  options.threads = settings.threads;
  options.trace = &trace;
  const CpuAttnResult out = cpu_attention(in->params, options, kin.view());
  return head_metrics(in->params, out, trace);
}

}  // namespace attnscope
