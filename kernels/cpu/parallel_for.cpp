// Fork-join work distribution: an atomic counter hands out items to the calling thread and its
// helper threads, which each calling thread starts on its first loop and keeps for the next
// (starting a thread costs about 30 us, a wake-up a few).
#include "kernels/cpu/parallel_for.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace attnscope::cpu {
namespace {

// A short wait in a spin loop.
inline void pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins before a helper sleeps, or the caller waits for its helpers to finish: loops follow one
// another within microseconds in the kernels, faster than a sleeping thread wakes (tens of us on
// a virtual machine); a few tens of microseconds of spinning.
constexpr int kSpins = 4096;

// The helper threads of one calling thread: helper i runs worker i + 1 of each loop that has
// more than i + 1 workers; between loops it spins a while, then sleeps.
class Helpers {
 public:
  Helpers() = default;
  Helpers(const Helpers&) = delete;
  Helpers& operator=(const Helpers&) = delete;
  ~Helpers() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // body(w) for w in [0, workers): w = 0 on the caller, the others on helpers; returns once
  // every one returned. body must not throw.
  void run(int workers, const std::function<void(int)>& body) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int>(threads_.size()) < workers - 1) {
        const int index = static_cast<int>(threads_.size());
        const uint64_t seen = generation_.load(std::memory_order_relaxed);
        threads_.emplace_back([this, index, seen] { serve(index, seen); });
      }
      body_ = &body;
      workers_ = workers;
      pending_.store(workers - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    body(0);
    for (int i = 0; i < kSpins && pending_.load(std::memory_order_acquire) != 0; ++i) pause();
    if (pending_.load(std::memory_order_acquire) != 0) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
  }

 private:
  void serve(int index, uint64_t seen) {
    for (;;) {
      for (int i = 0; i < kSpins && generation_.load(std::memory_order_acquire) == seen; ++i) {
        pause();
      }
      const std::function<void(int)>* body = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(
            lock, [&] { return stopping_ || generation_.load(std::memory_order_acquire) != seen; });
        if (stopping_) return;
        seen = generation_.load(std::memory_order_acquire);
        if (index + 1 < workers_) body = body_;
      }
      if (body == nullptr) continue;
      (*body)(index + 1);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const std::lock_guard<std::mutex> lock(mutex_);  // the caller may be going to sleep
        done_.notify_one();
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* body_ = nullptr;  // written under mutex_, as is workers_
  int workers_ = 0;
  std::atomic<uint64_t> generation_{0};  // one more per loop
  std::atomic<int> pending_{0};          // helpers of the current loop not finished
  bool stopping_ = false;
};

// The calling thread's helpers; `busy` while they run one of its loops (a loop started from
// inside one of its own items then starts threads of its own). A forked child makes new ones:
// the parent's helper threads do not exist in it (their handles are left, never joined).
struct CallerHelpers {
  std::unique_ptr<Helpers> helpers;
  pid_t owner = 0;
  bool busy = false;

  Helpers& get() {
    if (owner != getpid()) {
      static_cast<void>(helpers.release());
      helpers = std::make_unique<Helpers>();
      owner = getpid();
    }
    return *helpers;
  }
};

}  // namespace

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
  const std::function<void(int)> run = [&](int worker) {
    try {
      for (int64_t item = next++; item < n_items; item = next++) fn(item, worker);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next = n_items;
    }
  };
  thread_local CallerHelpers caller;
  if (!caller.busy) {
    caller.busy = true;
    struct Release {
      bool& busy;
      ~Release() { busy = false; }
    } release{caller.busy};
    caller.get().run(workers, run);
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(workers - 1));
    for (int w = 1; w < workers; ++w) pool.emplace_back(run, w);
    run(0);
    for (std::thread& t : pool) t.join();
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace attnscope::cpu
