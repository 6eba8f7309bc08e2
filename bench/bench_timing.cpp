// Warm-up and interleaved median-of-N timing of prepared registry runs.
#include "bench_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "kernels/precision.h"

namespace attnscope::bench {
namespace {

double elapsed_ms(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

std::string first_line(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

// A prepared variant and its per-phase samples (fwd, bwd, fwd+bwd).
struct Slot {
  VariantTiming timing;
  std::unique_ptr<VariantRun> run;
  std::vector<double> ms[3];
};

// One timed sample of a phase; the backward alone runs after an untimed forward.
double sample_ms(VariantRun& run, int phase) {
  if (phase == 0) return elapsed_ms([&] { run.forward(); });
  if (phase == 1) {
    run.forward();
    return elapsed_ms([&] { run.backward(); });
  }
  return elapsed_ms([&] {
    run.forward();
    run.backward();
  });
}

// Stops sampling a phase after settings.reps samples, or after 3 once they took the budget.
bool wants_more(const std::vector<double>& ms, const BenchSettings& settings) {
  double total = 0;
  for (double x : ms) total += x;
  const int n = static_cast<int>(ms.size());
  return n < settings.reps && (n < 3 || total <= 1e3 * settings.phase_budget_s);
}

}  // namespace

double median(std::vector<double> xs) {
  if (xs.empty()) return NAN;
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 == 1 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

double median_paired_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ratios;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) ratios.push_back(a[i] / b[i]);
  return median(std::move(ratios));
}

double fwd_flops(const BenchPoint& p) {
  const double full = 4.0 * p.batch * p.heads * p.seqlen * p.seqlen * p.head_dim;
  return p.causal ? full / 2 : full;
}

double bwd_flops(const BenchPoint& p) {
  return 2.5 * fwd_flops(p);
}

AttnParams params_of(const BenchPoint& p) {
  AttnParams a;
  a.batch = p.batch;
  a.heads = a.kv_heads = p.heads;
  a.seqlen_q = a.seqlen_k = p.seqlen;
  a.head_dim = a.head_dim_v = p.head_dim;
  a.scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  a.causal = p.causal;
  a.precision = p.precision;
  return a;
}

BenchInputs make_bench_inputs(const BenchPoint& p) {
  std::mt19937 gen(20240611u);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const auto fill = [&](std::vector<double>& x) {
    x.resize(static_cast<size_t>(p.batch * p.heads * p.seqlen * p.head_dim));
    for (double& e : x) e = round_to(p.precision, unit(gen));
  };
  BenchInputs in;
  fill(in.q);
  fill(in.k);
  fill(in.v);
  fill(in.dout);
  return in;
}

std::vector<VariantTiming> time_interleaved(const std::vector<TimingPlan>& plan,
                                            const BenchSettings& settings) {
  std::vector<Slot> slots(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    const KernelVariant& v = *plan[i].variant;
    const BenchPoint& point = plan[i].point;
    const AttnParams params = params_of(point);
    VariantTiming& t = slots[i].timing;
    t.variant = v.name;
    t.label = v.name + (plan[i].instrument ? "+instr" : "");
    t.instrumented = plan[i].instrument;
    const Mode mode = v.modes.empty() ? Mode::fused : v.modes.front();
    const Support support = v.supports(params, point.precision, mode);
    if (!support) {
      t.reason = support.reason;
      continue;
    }
    try {
      const RunConfig config{point.precision, mode, settings.threads, plan[i].instrument};
      slots[i].run = v.prepare(params, config, plan[i].inputs->view());
      for (int w = 0; w < settings.warmup; ++w) {
        slots[i].run->forward();
        slots[i].run->backward();
      }
    } catch (const std::exception& e) {
      t.reason = first_line(e);
      slots[i].run.reset();
    }
  }
  for (int phase = 0; phase < 3; ++phase) {
    for (bool more = true; more;) {
      more = false;
      for (Slot& slot : slots) {
        if (!slot.run || !wants_more(slot.ms[phase], settings)) continue;
        try {
          slot.ms[phase].push_back(sample_ms(*slot.run, phase));
          more = true;
        } catch (const std::exception& e) {
          slot.timing.reason = first_line(e);
          slot.run.reset();
        }
      }
    }
  }
  std::vector<VariantTiming> out;
  for (Slot& slot : slots) {
    VariantTiming& t = slot.timing;
    t.ok = slot.run != nullptr;
    t.time = {median(slot.ms[0]), median(slot.ms[1]), median(slot.ms[2])};
    t.reps = static_cast<int>(std::min({slot.ms[0].size(), slot.ms[1].size(), slot.ms[2].size()}));
    for (int phase = 0; phase < 3; ++phase) t.samples[phase] = std::move(slot.ms[phase]);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace attnscope::bench
