// The per-query-row series a row plot shows for one head (m and LSE, l, ||O_i||, ||dQ_i||), with
// the threshold lines that matter at the head's precision: the exp range -88.7 and, in fp16,
// ±65504. Shared by the row-plot dock and `attnscope-cli export`.
#pragma once

#include <vector>

#include "app/gui/HeadCompute.h"
#include "app/plot/RowPlotView.h"

namespace attnscope {

enum class RowSeriesKind { m_lse, l, o_norm, dq_norm };

struct HeadRowSeries {
  std::vector<RowSeries> series;  // each [Sq]
  std::vector<Threshold> thresholds;
};

HeadRowSeries head_row_series(const HeadResult& result, RowSeriesKind kind);

}  // namespace attnscope
