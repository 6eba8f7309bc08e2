// QCustomPlot building blocks of a heatmap: gradients from the attnscope colormaps, the
// overlay gradient of the four non-finite / masked classes, filling a value map and an overlay
// map from a MatrixGrid, and an axis ticker that labels display-space ticks in data units.
#pragma once

#include <qcustomplot.h>

#include <vector>

#include "app/plot/Colormaps.h"
#include "app/plot/MatrixGrid.h"

namespace attnscope {

// A gradient with the colormap's stops; NaN cells transparent.
QCPColorGradient makeGradient(ColormapKind kind);

// The overlay gradient: data range [0, 1], class k (1..4) drawn at overlayPosition(k).
QCPColorGradient makeOverlayGradient();
double overlayPosition(CellClass cls);

// Gives a map the data object that fillColorMaps writes in bulk (once, before filling it).
void useBulkData(QCPColorMap* map);

// Fills `values` with the display-space values of the grid's finite cells (clamped to the
// scale's [lo, hi]; others NaN = transparent) and `overlay` with the non-finite / masked cells
// (hidden when there are none). Both maps went through useBulkData.
// Cell centres sit on element indices (element i spans [i - 0.5, i + 0.5]).
void fillColorMaps(const MatrixGrid& grid, const ColorScale& scale, QCPColorMap* values,
                   QCPColorMap* overlay);

// Display-space values (toDisplay) of the grid's finite cells into *out (its capacity is
// reused); log scales skip zeros.
void displayValues(const MatrixGrid& grid, ScaleKind scale, double linthresh,
                   std::vector<double>* out);

// Cells drawn in each overlay class.
struct OverlayCells {
  int64_t nan = 0, pos_inf = 0, neg_inf = 0, masked = 0;
};
OverlayCells countOverlayCells(const MatrixGrid& grid);

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
