// LibTorch's sgemm rate (see torch_roof.h).
#include "core/torch_roof.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace attnscope {

MatmulRoof torch_sgemm_roof(int64_t n, int threads, int reps) {
  at::set_num_threads(threads);
  at::manual_seed(0);
  const at::Tensor a = at::rand({n, n}, at::kFloat), b = at::rand({n, n}, at::kFloat);
  at::Tensor c = at::mm(a, b);
  std::vector<double> seconds;
  for (int r = 0; r < std::max(reps, 1); ++r) {
    const auto start = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  MatmulRoof roof;
  roof.n = n;
  roof.gflops = 2.0 * static_cast<double>(n) * n * n / (seconds[seconds.size() / 2] * 1e9);
  roof.torch_cpu_isa = at::get_cpu_capability();
  return roof;
}

}  // namespace attnscope
