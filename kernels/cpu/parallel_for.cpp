// Fork-join work distribution: an atomic counter hands out items to std::thread workers.
#include "kernels/cpu/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace attnscope::cpu {

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

int streaming_threads(int threads, int64_t bytes) {
  constexpr int64_t kSerialBytes = int64_t{2} << 20;
  return bytes < kSerialBytes ? 1 : threads;
}

void parallel_for(int64_t n_items, int threads,
                  const std::function<void(int64_t item, int worker)>& fn) {
  if (n_items <= 0) return;
  const int workers = static_cast<int>(std::min<int64_t>(std::max(threads, 1), n_items));
  if (workers == 1) {
    for (int64_t item = 0; item < n_items; ++item) fn(item, 0);
    return;
  }
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto run = [&](int worker) {
    try {
      for (int64_t item = next++; item < n_items; item = next++) fn(item, worker);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next = n_items;
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  for (int w = 1; w < workers; ++w) pool.emplace_back(run, w);
  run(0);
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace attnscope::cpu
