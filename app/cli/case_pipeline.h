// Runs the cases of a command on worker threads and hands them back in case order on the
// calling thread: lazy (only a window of cases is loaded or analysed at a time), stopped by
// SIGINT (no new case starts; a started case that the interrupt cut short is not handed back,
// nor any case after it), with a progress line on stderr when stderr is a terminal.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace attnscope {

struct PipelineOptions {
  int workers = 1;
  // Cases started but not yet handed back at most; 0 = 2 * workers. Bounds memory when an
  // early case is slow and later ones pile up behind it.
  size_t window = 0;
  // "scan" shows "scan: 120/2000 cases" on a terminal; empty = no progress line.
  std::string progress_label;
};

struct PipelineOutcome {
  size_t emitted = 0;        // cases handed back: always a prefix 0 .. emitted-1
  bool interrupted = false;  // SIGINT stopped it before every case started
};

// work(i) runs on a worker thread, cases starting in increasing i, and returns false when the
// interrupt cut case i short (its result is incomplete); emit(i) runs on the calling thread
// exactly once per finished case, in increasing i, never concurrently with another emit, and
// never from the first cut-short case on. The first exception thrown by work or emit stops
// the pipeline and is rethrown after every worker has joined.
PipelineOutcome run_in_order(size_t count, const PipelineOptions& options,
                             const std::function<bool(size_t)>& work,
                             const std::function<void(size_t)>& emit);

// Splits `threads` (0 = hardware concurrency) between cases and the kernels inside a case:
// {case workers, kernel threads per case}; case workers never exceed `cases`.
std::pair<int, int> split_threads(int threads, size_t cases);

}  // namespace attnscope
