// LibTorch's fp32 matrix multiply on this machine: the roof attnscope-bench sets the CPU
// kernels' GFLOP/s against, measured in the same run with the same threads.
#pragma once

#include <cstdint>
#include <string>

namespace attnscope {

struct MatmulRoof {
  int64_t n = 0;              // square n x n x n products
  double gflops = 0;          // 2 n^3 FLOP over the median time
  std::string torch_cpu_isa;  // the vector ISA LibTorch dispatched ("AVX512", "AVX2", ...)
};

// One untimed product, then the median of `reps` (>= 1) products of random fp32 matrices on
// `threads` (> 0) LibTorch threads.
MatmulRoof torch_sgemm_roof(int64_t n, int threads, int reps);

}  // namespace attnscope
