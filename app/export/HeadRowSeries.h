// The per-query-row series a row plot shows for one head (m and LSE, l, ||O_i||, ||dQ_i||), with
// the threshold lines that matter at the head's precision: the exp range -88.7 and, in fp16,
// ±65504, and the series' names (choice box label, plot title, the view name annotations carry).
// Shared by the row-plot dock and `attnscope-cli export`.
#pragma once

#include <QString>
#include <optional>
#include <vector>

#include "app/plot/RowPlotView.h"
#include "core/view/head_compute.h"

namespace attnscope {

enum class RowSeriesKind { m_lse, l, o_norm, dq_norm };

struct HeadRowSeries {
  std::vector<RowSeries> series;  // each [Sq]
  std::vector<Threshold> thresholds;
};

HeadRowSeries head_row_series(const HeadResult& result, RowSeriesKind kind);

// Every series, in the order of the row plot's choice box.
std::vector<RowSeriesKind> allRowSeries();
// The series' name in the choice box and the plot title ("softmax denominator l").
QString rowSeriesLabel(RowSeriesKind kind);
// The name annotations of the series carry as their view ("row l", ...), x = query row,
// y = value.
QString rowSeriesView(RowSeriesKind kind);
// The series whose rowSeriesView() is `view`; nullopt for other views (heatmap tabs).
std::optional<RowSeriesKind> rowSeriesOfView(const QString& view);
// The plot title of a series of a result: "label · bB hH · precision mode".
QString rowSeriesTitle(const HeadResult& result, RowSeriesKind kind);

}  // namespace attnscope
