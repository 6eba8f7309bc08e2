// Row-plot dock: per-query-row series of the selected head along the sequence (m and LSE, the
// softmax denominator l, ||O_i||, ||dQ_i||) with threshold lines where they matter: the exp
// range -88.7 and, in fp16, the largest finite value 65504. User annotations go on it like on the
// heatmaps: it draws the AnnotationBoard's annotations of the shown series and reports the
// user's.
#pragma once

#include <QWidget>
#include <optional>
#include <vector>

#include "app/export/HeadRowSeries.h"

class QComboBox;

namespace attnscope {

class RowPlotView;
class SessionContext;

class RowPlotPanel : public QWidget {
  Q_OBJECT

 public:
  using Series = RowSeriesKind;

  explicit RowPlotPanel(SessionContext* context, QWidget* parent = nullptr);

  void showSeries(Series series);
  // Shows `series` and brings the panel's dock to the front (shown, raised).
  void reveal(Series series);
  Series series() const { return series_; }
  // The view annotations of the shown series carry (rowSeriesView).
  QString viewName() const;
  RowPlotView* plot() const { return plot_; }

 private:
  void redraw();
  void showAnnotations();

  SessionContext* context_;
  QComboBox* choice_ = nullptr;
  RowPlotView* plot_ = nullptr;
  Series series_ = Series::m_lse;
};

}  // namespace attnscope
