// Read-only scans of score-shaped tiles (see trace_scan.h).
#include "kernels/cpu/trace_scan.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/tile_math.h"

namespace attnscope::cpu {

bool needs_mask_classes(const AttnParams& params) {
  return params.mask != nullptr || params.bias != nullptr;
}

void mask_classes(const HeadContext& x, const ScoreTile& t, uint8_t* cls) {
  const AttnParams& p = *x.params;
  for (int64_t r = 0; r < t.rows; ++r) {
    uint8_t* c_r = cls + r * t.cols;
    const int64_t visible = causal_visible_cols(p, t, r);
    std::fill(c_r, c_r + visible, kEntryVisible);
    std::fill(c_r + visible, c_r + t.cols, kEntryFillMasked);
    if (p.bias != nullptr) {
      const BroadcastStrides& st = p.bias_strides;
      const double* b_r = p.bias + x.b * st.b + x.h * st.h + (t.i0 + r) * st.q + t.j0 * st.k;
      // A sentinel bias (-1e4, -1e9, -inf) masks its position, whether or not it rounds to
      // -inf in the precision (that it overflowed is the mask_fill_overflow finding).
      for (int64_t c = 0; c < visible; ++c) {
        if (b_r[c * st.k] <= kBiasSentinel) c_r[c] = kEntryBiasMasked;
      }
    }
    if (p.mask != nullptr) {
      const BroadcastStrides& st = p.mask_strides;
      const uint8_t* m_r = p.mask + x.b * st.b + x.h * st.h + (t.i0 + r) * st.q + t.j0 * st.k;
      for (int64_t c = 0; c < visible; ++c) {
        if (m_r[c * st.k] == 0) c_r[c] = kEntryFillMasked;
      }
    }
  }
}

NonfiniteCount count_block(const float* x, int64_t rows, int64_t cols, int64_t ld) {
  NonfiniteCount n;
  if (cols == ld && count_nonfinite(x, rows * cols) == 0) return n;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_r = x + r * ld;
    if (count_nonfinite(x_r, cols) == 0) continue;
    for (int64_t c = 0; c < cols; ++c) add_nonfinite(n, x_r[c]);
  }
  return n;
}

ScoreRowStats score_row_stats(const float* s, int64_t cols, int64_t visible, const uint8_t* cls) {
  ScoreRowStats st;
  if (cls == nullptr) {
    st.masked = st.fill_masked = static_cast<int32_t>(cols - visible);
    if (finite_max(s, visible, &st.max_abs, &st.max) > 0) {
      for (int64_t c = 0; c < visible; ++c) add_nonfinite(st.nonfinite, s[c]);
    }
    return st;
  }
  for (int64_t c = 0; c < cols; ++c) {
    if (cls[c] != kEntryVisible) {
      ++st.masked;
      st.fill_masked += cls[c] == kEntryFillMasked;
      continue;
    }
    const float v = s[c];
    if (std::isfinite(v)) {
      st.max_abs = std::max(st.max_abs, std::fabs(v));
      st.max = std::max(st.max, v);
    } else {
      add_nonfinite(st.nonfinite, v);
    }
  }
  return st;
}

NonfiniteCount count_visible(const AttnParams& params, const ScoreTile& t, const float* s,
                             const uint8_t* cls) {
  NonfiniteCount n;
  for (int64_t r = 0; r < t.rows; ++r) {
    const uint8_t* c_r = cls != nullptr ? cls + r * t.cols : nullptr;
    n += score_row_stats(s + r * t.ld, t.cols, causal_visible_cols(params, t, r), c_r).nonfinite;
  }
  return n;
}

}  // namespace attnscope::cpu
