// attnscope-bench output: per point the timings of every variant, GFLOP/s, the ratios of our
// CPU fused kernel (instrumentation off and on) to LibTorch math and PyTorch CPU flash, the
// pooled-heatmap cost, and the DESIGN §7 targets; as JSON (--json) or as a readable table.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "heatmap_bench.h"

namespace attnscope::bench {

struct PointResult {
  BenchPoint point;
  std::vector<VariantTiming> timings;
};

struct BenchReport {
  BenchSettings settings;
  std::vector<PointResult> points;
  bool has_heatmap = false;
  HeatmapResult heatmap;
  // The GPU part (gpu_bench.h), pre-rendered: a JSON member ending in ",\n" and a table.
  std::string gpu_json, gpu_table;
};

// Labels of the variants each point times, in order.
inline constexpr const char* kOwn = "cpu-fused";
inline constexpr const char* kOwnInstr = "cpu-fused+instr";
inline constexpr const char* kTorchMath = "torch-math";
inline constexpr const char* kTorchFlash = "torch-flash-cpu";

void write_json(std::ostream& os, const BenchReport& report);
void write_table(std::ostream& os, const BenchReport& report);

}  // namespace attnscope::bench
