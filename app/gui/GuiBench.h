// `attnscope --bench-gui [RUNS [SEQLEN]]`: the slider-to-render latency of DESIGN §7 measured
// in the real window (offscreen). A one-case dump (B = H = 1, S = SEQLEN (default 2048), D = 64,
// fp32, random inputs) is written to a temporary folder and opened; then RUNS times the softmax
// scale changes as a slider move would, and the time until the new result is applied, the
// queued replots have run and every widget they changed has painted itself (the event loop runs
// until a round delivers no event) is taken: once for the shown view (S, redrawn from the
// forward's result), once for every view (the backward's). Prints each run with the widgets
// painted, the medians, their compute / render split and, for comparison, the time of a
// repaint of the whole window.
#pragma once

#include <QString>

namespace attnscope {

struct GuiBenchOptions {
  int runs = 15;
  int64_t seqlen = 2048, head_dim = 64;
};

// Runs the bench inside an existing QApplication; returns the process exit code (0 on
// success, 1 when the dump cannot be written or a result never arrives).
int runGuiBench(const GuiBenchOptions& options);

// `attnscope --bench-open [SEQLEN]`: a real-size layer (B=1, H=32, Hkv=8, S=SEQLEN (default
// 4096), D=128, bf16, causal) written to a temporary folder and opened in the window at
// 1366×728: the time until the case is read, until the first heatmap is drawn, until every view
// of the head is ready and until the case scan ends, and the process's peak resident memory.
int runOpenBench(int64_t seqlen);

}  // namespace attnscope
