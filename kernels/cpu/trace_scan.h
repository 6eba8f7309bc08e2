// Read-only scans of score-shaped tiles for the instrumentation, the stepper and the pooled
// heatmaps: which entries are masked, non-finite counts by class, and the finite maxima of the
// visible scores. Fast vector paths when a block is all finite; classification otherwise.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/attn_trace.h"
#include "kernels/cpu/forward_stages.h"
#include "kernels/precision.h"  // kExpOverflowArg

namespace attnscope::cpu {

// True when entries of some tile may be masked individually (bool mask or bias); causal
// masking alone is handled per row by causal_visible_cols.
bool needs_mask_classes(const AttnParams& params);

// Keys [t.j0, t.j0 + result) of tile row r are not causally hidden (t.cols without causal).
// Inline: the trace asks for every row of every tile.
inline int64_t causal_visible_cols(const AttnParams& params, const ScoreTile& t, int64_t r) {
  if (!params.causal) return t.cols;
  // Key j is hidden from query i iff j > i + causal_shift.
  return std::clamp<int64_t>(t.i0 + r + causal_shift(params) + 1 - t.j0, 0, t.cols);
}

// cls[r * t.cols + c] = MaskedEntry of entry (r, c) of tile t of head (x.b, x.h); compact
// [rows x cols]. Covers causal, bool mask and -inf bias.
void mask_classes(const HeadContext& x, const ScoreTile& t, uint8_t* cls);

// Adds the class of one value to a count (finite values add nothing).
inline void add_nonfinite(NonfiniteCount& n, float v) {
  if (v != v) {
    ++n.nan;
  } else if (v == std::numeric_limits<float>::infinity()) {
    ++n.pos_inf;
  } else if (v == -std::numeric_limits<float>::infinity()) {
    ++n.neg_inf;
  }
}

// Non-finite counts of a block [rows x cols] with row stride ld.
NonfiniteCount count_block(const float* x, int64_t rows, int64_t cols, int64_t ld);

// Visible entries of one score row.
struct ScoreRowStats {
  float max_abs = 0;                                    // max |s| over finite visible scores
  float max = -std::numeric_limits<float>::infinity();  // max s over finite visible scores
  int32_t masked = 0, fill_masked = 0;  // masked entries; those holding the fill value
  NonfiniteCount nonfinite;             // visible non-finite scores
};

// Stats of score row s[0:cols]: with cls (that row's MaskedEntry entries) when non-null,
// otherwise keys [visible, cols) are fill-masked (causal) and the rest visible.
ScoreRowStats score_row_stats(const float* s, int64_t cols, int64_t visible, const uint8_t* cls);

// Non-finite counts of the visible entries of a score tile s [rows x cols] (row stride t.ld);
// cls as for score_row_stats (compact [rows x cols]) or null.
NonfiniteCount count_visible(const AttnParams& params, const ScoreTile& t, const float* s,
                             const uint8_t* cls);

}  // namespace attnscope::cpu
