// parallel_for: every item once with a worker index below the thread count, back-to-back calls
// with other worker counts, nested and concurrent calls, the first exception rethrown, and
// loops in a forked child.
#include "kernels/cpu/parallel_for.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace attnscope::cpu {
namespace {

// Runs parallel_for(n, threads) and checks that each item ran once on a worker < threads.
void expect_each_item_once(int64_t n, int threads) {
  std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
  std::atomic<int> bad_worker{0};
  parallel_for(n, threads, [&](int64_t item, int worker) {
    ++runs[static_cast<size_t>(item)];
    if (worker < 0 || worker >= threads) ++bad_worker;
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(runs[static_cast<size_t>(i)], 1) << "item " << i;
  EXPECT_EQ(bad_worker, 0);
}

TEST(ParallelFor, every_item_once_on_a_worker_below_the_thread_count_across_calls) {
  for (int round = 0; round < 50; ++round) {
    for (int threads : {1, 2, 3, 8}) {
      for (int64_t n : {1, 2, 7, 100}) expect_each_item_once(n, threads);
    }
  }
}

TEST(ParallelFor, nested_and_concurrent_calls_complete_every_item) {
  std::atomic<int64_t> inner{0};
  parallel_for(4, 2, [&](int64_t, int) {
    parallel_for(5, 2, [&](int64_t item, int worker) {
      EXPECT_LT(worker, 2);
      inner += item + 1;
    });
  });
  EXPECT_EQ(inner, 4 * 15);

  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 100; ++round) {
        parallel_for(10, 2, [&](int64_t item, int) { sum += item; });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(sum, 3 * 100 * 45);
}

TEST(ParallelFor, the_first_exception_is_rethrown_and_later_loops_still_work) {
  EXPECT_THROW(parallel_for(100, 2,
                            [](int64_t item, int) {
                              if (item == 37) throw std::runtime_error("item 37");
                            }),
               std::runtime_error);
  expect_each_item_once(100, 2);
}

TEST(ParallelFor, a_forked_child_runs_its_loops) {
  expect_each_item_once(16, 2);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::atomic<int64_t> sum{0};
    parallel_for(16, 2, [&](int64_t item, int) { sum += item; });
    _exit(sum == 120 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace attnscope::cpu
