// `attnscope-bench --scan-scale` (issue 43): one attention layer of a 7B-class model recorded
// with LibTorch (B=1, H=32, Hkv=8, S, D=128, bf16, causal), the user's own forward + backward of
// it, `scan` of it with default options (analyze_case, as the CLI runs it) and the window's
// time to first heatmap (`attnscope --bench-open`, offscreen), in one run: the ratio of scan to
// step, the peak resident memory of each phase and the targets met or missed.
#pragma once

#include <iosfwd>

#include "core/torch_layer.h"

namespace attnscope::bench {

// Prints the report to `out` for the layer `shape` (the window's figures only for the default
// 32 / 8 heads, the shape `attnscope --bench-open` opens); `threads`: kernel and LibTorch
// threads (0: all cores); `reps`: timed LibTorch steps (median). Returns 0, or 1 when the layer
// could not be recorded.
int run_scan_scale(std::ostream& out, const LayerShape& shape, int threads, int reps);

}  // namespace attnscope::bench
