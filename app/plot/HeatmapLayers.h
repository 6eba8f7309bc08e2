// QCustomPlot building blocks of a heatmap besides its image (HeatmapImage.h): the colour bar's
// gradient from an attnscope colormap, the display-space values the range histogram counts, and
// an axis ticker that labels display-space ticks in data units.
#pragma once

#include <qcustomplot.h>

#include <vector>

#include "app/plot/Colormaps.h"
#include "core/view/matrix_grid.h"

namespace attnscope {

// A gradient with the colormap's stops (the colour bar beside the image).
QCPColorGradient makeGradient(ColormapKind kind);

// Display-space values (toDisplay) of the grid's finite cells into *out (its capacity is
// reused); log scales skip zeros.
void displayValues(const MatrixGrid& grid, ScaleKind scale, double linthresh,
                   std::vector<double>* out);

// Ticks placed uniformly in display space, labelled with the data value they stand for.
class ScaleTicker : public QCPAxisTicker {
 public:
  void setScale(ScaleKind scale, double linthresh);

 protected:
  QString getTickLabel(double tick, const QLocale& locale, QChar formatChar,
                       int precision) override;

 private:
  ScaleKind scale_ = ScaleKind::linear;
  double linthresh_ = 1.0;
};

}  // namespace attnscope
