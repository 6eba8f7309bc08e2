// `attnscope --bench-gui [RUNS]`: the slider-to-render latency of DESIGN §7 measured in the
// real window (offscreen). A one-case dump (B = H = 1, S = 2048, D = 64, fp32, random inputs)
// is written to a temporary folder and opened; then RUNS times the softmax scale changes as a
// slider move would, and the time until the new result is applied and every visible view has
// been repainted is taken. Prints each run, the median and the compute / render split.
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

}  // namespace attnscope
