// The pooled-heatmap check of DESIGN §7: a 1024 x 1024 pooled heatmap of one head at S = 16384
// costs <= 1.5 forward passes of that head and <= 64 MB of extra memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_timing.h"

namespace attnscope::bench {

struct HeatmapPoint {
  int64_t seqlen = 16384, head_dim = 64, pixels = 1024;  // one (batch, head), fp32, non-causal
};

// One pooled computation: which matrices, its median time, the time as a multiple of one
// forward pass, and the peak bytes it allocated beyond what was held before it.
struct HeatmapTiming {
  std::string matrices;  // "s", "p" or "s,p,dp,ds"
  double ms = 0, forward_passes = 0;
  int64_t peak_extra_bytes = 0;
};

struct HeatmapResult {
  HeatmapPoint point;
  double forward_ms = 0;  // cpu-fused forward of the same head
  std::vector<HeatmapTiming> timings;
};

// Times the forward and the pooled S, P, and all four matrices with the bench's threads and
// repetitions; memory is counted through operator new (alloc_counter.h).
HeatmapResult time_heatmap(const HeatmapPoint& point, const BenchSettings& settings);

}  // namespace attnscope::bench
