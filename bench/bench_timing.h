// Timing of registry variants at bench points (DESIGN §7): warm-up, then the median of N
// interleaved repetitions of forward, backward and forward + backward, paired ratios of
// samples, and the FLOP counts behind GFLOP/s.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/kernel_registry.h"

namespace attnscope::bench {

// One shape of the grid: self-attention, Sq = Sk = seqlen, D = Dv = head_dim.
struct BenchPoint {
  int64_t batch = 1, heads = 8, seqlen = 2048, head_dim = 64;
  bool causal = false;
  Precision precision = Precision::f32;
};

struct BenchSettings {
  int threads = 2;  // for our kernels and LibTorch alike
  int reps = 5;     // timed repetitions per phase; the median is reported
  int warmup = 1;   // untimed forward + backward runs first
  // A phase stops early, after at least 3 repetitions, once its runs took this long (LibTorch
  // bf16 math attention takes seconds per pass on CPUs without native bf16 matmul).
  double phase_budget_s = 10;
};

// Median wall times in milliseconds.
struct Timing {
  double fwd_ms = 0, bwd_ms = 0, fwd_bwd_ms = 0;
};

struct VariantTiming {
  std::string label;    // "cpu-fused", "cpu-fused+instr", "torch-eager", "torch-flash-cpu"
  std::string variant;  // registry name
  bool instrumented = false;
  bool ok = false;
  std::string reason;  // why it did not run (unsupported, or the error)
  Timing time;
  int reps = 0;  // fewest repetitions any phase ran (see BenchSettings::phase_budget_s)
  // Each phase's samples (fwd, bwd, fwd_bwd) in round order: sample i of every run timed
  // together ran in round i, one run after the other.
  std::vector<double> samples[3];
};

// Median of xs (NaN when empty).
double median(std::vector<double> xs);
// Median over rounds of a[i] / b[i], for samples timed in the same rounds: the machine's drift
// between rounds cancels in each ratio, where a ratio of two medians mixes rounds. NaN when
// either is empty.
double median_paired_ratio(const std::vector<double>& a, const std::vector<double>& b);

// fwd: 4 * B * H * Sq * Sk * D, halved if causal; bwd: 2.5x the forward.
double fwd_flops(const BenchPoint& p);
double bwd_flops(const BenchPoint& p);

AttnParams params_of(const BenchPoint& p);

// Random inputs of a point in [-1, 1), rounded to its precision.
struct BenchInputs {
  std::vector<double> q, k, v, dout;
  VariantInputs view() const { return {q.data(), k.data(), v.data(), dout.data()}; }
};
BenchInputs make_bench_inputs(const BenchPoint& p);

// What to time: a registry variant at a point, with or without instrumentation, on inputs
// made for that point (they outlive the timing).
struct TimingPlan {
  const KernelVariant* variant = nullptr;
  bool instrument = false;
  BenchPoint point;
  const BenchInputs* inputs = nullptr;
};

// Prepares every planned run once and warms it up, then times the phases with the runs
// interleaved (repetition r of each run before repetition r + 1 of any), so that load changes
// on a shared machine hit all of them alike. Returns one timing per plan entry, in plan order;
// unsupported combinations and errors come back with ok = false and the reason.
std::vector<VariantTiming> time_interleaved(const std::vector<TimingPlan>& plan,
                                            const BenchSettings& settings);

}  // namespace attnscope::bench
