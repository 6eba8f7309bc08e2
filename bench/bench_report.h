// attnscope-bench output: per point the timings of every variant, GFLOP/s, the ratios of our
// CPU fused kernel (instrumentation off and on) to LibTorch math and PyTorch CPU flash, the
// pooled-heatmap cost, and the DESIGN §7 targets; as JSON (--json) or as a readable table.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "core/torch_roof.h"
#include "heatmap_bench.h"

namespace attnscope::bench {

struct PointResult {
  BenchPoint point;
  std::vector<VariantTiming> timings;
};

struct BenchReport {
  BenchSettings settings;
  // The machine: the instruction set the CPU kernels ran (kernels/cpu/cpu_isa.h), the sets this
  // CPU offers, and LibTorch's sgemm rate measured in this run, the roof of the forward.
  std::string cpu_isa;
  std::vector<std::string> cpu_isas_available;
  std::string omp_wait_policy;  // what LibTorch's OpenMP workers ran with (main.cpp)
  MatmulRoof roof;
  std::vector<PointResult> points;
  bool has_heatmap = false;
  HeatmapResult heatmap;
  // The GPU part (gpu_bench.h), pre-rendered: a JSON member ending in ",\n" and a table.
  std::string gpu_json, gpu_table;
};

// Labels of the variants each point times, in order.
inline constexpr const char* kOwn = "cpu-fused";
inline constexpr const char* kOwnInstr = "cpu-fused+instr";
inline constexpr const char* kTorchMath = "torch-eager";  // LibTorch eager math + autograd
inline constexpr const char* kTorchFlash = "torch-flash-cpu";

// The timed phases of a point and what they are worth (DESIGN §7 FLOP formulas).
enum class Phase { fwd, bwd, fwd_bwd };
inline constexpr Phase kPhases[] = {Phase::fwd, Phase::bwd, Phase::fwd_bwd};
const char* phase_name(Phase ph);
double ms_of(const VariantTiming& t, Phase ph);
double flops_of(const BenchPoint& p, Phase ph);

// The timing of `label` at a point if it ran; nullptr otherwise.
const VariantTiming* find_timing(const PointResult& r, const std::string& label);
// Speed of `own` relative to `other` (other's time / own's time); NaN when either is missing.
double speedup(const PointResult& r, const char* own, const char* other, Phase ph);

// One target (DESIGN §7, issue 17): the measured value against its limit.
struct Target {
  const char* name;
  double value, limit;
  bool at_least;  // value >= limit (else value <= limit)
};
bool target_met(const Target& t);

// JSON pieces shared by the CPU and GPU reports: a number ("null" unless finite, %.4g) and a
// quoted string (quotes and backslashes escaped, newlines as spaces).
std::string json_number(double x);
std::string json_quoted(const std::string& s);

void write_json(std::ostream& os, const BenchReport& report);
void write_table(std::ostream& os, const BenchReport& report);

}  // namespace attnscope::bench
