// Ordered worker pool behind scan and run. Invariant: the started cases are exactly
// [0, next); done[i] marks finished ones (kCut: cut short by the interrupt); emitted <= next
// and every case below emitted was handed back. Workers start case `next` only while
// next < emitted + window.
#include "case_pipeline.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "interrupt.h"

namespace attnscope {
namespace {

// "\rscan: 120/2000 cases" on stderr, at most every 100 ms, cleared before stdout is written.
class ProgressLine {
 public:
  ProgressLine(const std::string& label, size_t total)
      : label_(label), total_(total), enabled_(!label.empty() && isatty(STDERR_FILENO) == 1) {}
  ~ProgressLine() { clear(); }

  void show(size_t done) {
    const auto now = std::chrono::steady_clock::now();
    if (!enabled_ || (shown_ && now - last_ < std::chrono::milliseconds(100))) return;
    std::fprintf(stderr, "\r%s: %zu/%zu cases", label_.c_str(), done, total_);
    std::fflush(stderr);
    shown_ = true;
    last_ = now;
  }
  void clear() {
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  std::string label_;
  size_t total_;
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_;
};

constexpr char kFinished = 1, kCut = 2;  // done[i]

}  // namespace

std::pair<int, int> split_threads(int threads, size_t cases) {
  const int total = threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
  const int workers = static_cast<int>(std::max<size_t>(1, std::min<size_t>(total, cases)));
  return {workers, std::max(1, total / workers)};
}

PipelineOutcome run_in_order(size_t count, const PipelineOptions& options,
                             const std::function<bool(size_t)>& work,
                             const std::function<void(size_t)>& emit) {
  const int workers = std::max(1, options.workers);
  const size_t window = options.window > 0 ? options.window : 2 * static_cast<size_t>(workers);
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<char> done(count, 0);
  size_t next = 0, emitted = 0;
  bool stop = false;
  std::exception_ptr failure;

  auto worker = [&] {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      changed.wait(lock, [&] { return stop || next >= count || next < emitted + window; });
      if (stop || next >= count) return;
      const size_t i = next++;
      lock.unlock();
      std::exception_ptr error;
      bool complete = false;
      try {
        complete = work(i);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error && !failure) failure = error;
      stop = stop || error != nullptr || !complete;
      done[i] = complete ? kFinished : kCut;
      changed.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) pool.emplace_back(worker);

  PipelineOutcome outcome;
  ProgressLine progress(options.progress_label, count);
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (emitted < count) {
      if (!stop && interrupt_requested()) {
        stop = outcome.interrupted = true;
        changed.notify_all();
      }
      if (done[emitted] == kCut) {
        stop = outcome.interrupted = true;
        break;
      }
      if (done[emitted] && !failure) {
        const size_t i = emitted;
        lock.unlock();
        progress.clear();
        try {
          emit(i);
        } catch (...) {
          lock.lock();
          failure = std::current_exception();
          stop = true;
          changed.notify_all();
          continue;
        }
        progress.show(i + 1);
        lock.lock();
        ++emitted;
        changed.notify_all();
        continue;
      }
      if (failure || (stop && emitted >= next)) break;
      progress.show(emitted);
      changed.wait_for(lock, std::chrono::milliseconds(100));
    }
    stop = true;
    changed.notify_all();
  }
  for (std::thread& t : pool) t.join();
  progress.clear();
  if (failure) std::rethrow_exception(failure);
  outcome.emitted = emitted;
  outcome.interrupted = outcome.interrupted && emitted < count;
  return outcome;
}

}  // namespace attnscope
