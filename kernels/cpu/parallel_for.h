// A minimal fork-join loop over independent work items on std::thread, used by the CPU
// attention kernels. Which worker runs an item never changes the item's result.
#pragma once

#include <cstdint>
#include <functional>

namespace attnscope::cpu {

// Number of workers for a requested count: `requested` when > 0, else the hardware
// concurrency (at least 1).
int resolve_threads(int requested);

// Workers worth using for one streaming pass over `bytes` of memory: 1 below 2 MiB, where
// handing work to other threads costs about what sharing the pass saves; else `threads`.
int streaming_threads(int threads, int64_t bytes);

// Calls fn(item, worker) once for every item in [0, n_items), spread over up to `threads`
// workers (worker in [0, threads)); items are handed out in increasing order as workers free
// up. The calling thread is worker 0, the others are helper threads it keeps from one loop to
// the next (a loop started from inside one of its own items runs on threads of its own). The
// first exception thrown by fn is rethrown after every worker finished.
void parallel_for(int64_t n_items, int threads,
                  const std::function<void(int64_t item, int worker)>& fn);

}  // namespace attnscope::cpu
