// The GPU part of attnscope-bench (DESIGN §7): the own CUDA fused kernel (instrumentation off
// and on) against PyTorch's CUDA SDPA flash, memory-efficient and cuDNN backends, timed in the
// same run through the registry, with TFLOP/s, ratios and the H200 targets. Without a CUDA
// device (no GPU variant registered) the part is skipped and says so.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench_report.h"

namespace attnscope::bench {

// Labels of the variants each GPU point times, in order.
inline constexpr const char* kGpuOwn = "cuda-fused";
inline constexpr const char* kGpuOwnInstr = "cuda-fused+instr";
inline constexpr const char* kGpuFlash = "torch-cuda-flash";
inline constexpr const char* kGpuEfficient = "torch-cuda-efficient";
inline constexpr const char* kGpuCudnn = "torch-cuda-cudnn";

struct GpuReport {
  bool ran = false;
  std::string skipped;  // why the GPU part did not run (ran = false)
  std::string device;   // "cuda-fused"'s description of the device
  std::vector<PointResult> points;
};

// quick = false: S in {2048, 8192} x D in {64, 128} x causal off/on, bf16, B*S = 16384 tokens
// of 16 heads. quick = true: S = 256, D = 64, causal off/on (smoke test).
GpuReport run_gpu_bench(const BenchSettings& settings, bool quick);

// The "gpu" member of the bench JSON, followed by ",\n".
void write_gpu_json(std::ostream& os, const GpuReport& report);
void write_gpu_table(std::ostream& os, const GpuReport& report);

}  // namespace attnscope::bench
