// Perceptual colormaps (viridis-like sequential, blue-white-red diverging), the linear / log /
// symlog value scales, and the overlay colours that keep NaN, +inf, -inf and masked apart.
// Qt Gui only (no QCustomPlot): the heatmap builds its gradients from these stops.
#pragma once

#include <QColor>
#include <QString>
#include <utility>
#include <vector>

#include "core/view/matrix_grid.h"

namespace attnscope {

enum class ColormapKind { sequential, diverging };
enum class ScaleKind { linear, log, symlog };

QString colormapName(ColormapKind kind);  // "sequential (viridis)", "diverging (blue-red)"
QString scaleName(ScaleKind kind);        // "linear", "log", "symlog"

// Colour stops (position in [0, 1], colour) of a colormap, first at 0 and last at 1.
const std::vector<std::pair<double, QColor>>& colormapStops(ColormapKind kind);

// Colour at position t of a colormap (t clamped to [0, 1]; linear RGB between stops).
QColor colormapColor(ColormapKind kind, double t);

// Colour of an overlay class (CellClass::value has none: invalid QColor). None of them is a
// colormap colour.
QColor overlayColor(CellClass cls);

// Display-space transforms: linear t = v; log t = log10|v| (-inf at 0); symlog
// t = sign(v) log10(1 + |v| / linthresh). fromDisplay inverts them (log gives |v|).
double toDisplay(ScaleKind scale, double v, double linthresh = 1.0);
double fromDisplay(ScaleKind scale, double t, double linthresh = 1.0);

// How values map to colours: [lo, hi] in data units, mapped through the scale and stretched
// over the colormap.
struct ColorScale {
  ColormapKind map = ColormapKind::sequential;
  ScaleKind scale = ScaleKind::linear;
  double lo = 0, hi = 1;
  double linthresh = 1.0;

  // Position in [0, 1] of a finite value (clamped); NaN for non-finite values.
  double position(double v) const;
  // Colour of a value: the colormap for finite values, the overlay colour for NaN / +-inf.
  QColor colorFor(double v) const;
};

// Number format of axes, range entries and readouts: "65504", "1.25e-05", "NaN", "+inf".
QString formatNumber(double v, int significant = 4);

// Automatic range of finite values: [min, max]; diverging maps (linear, symlog) get a range
// symmetric around 0; log scales use [min, max] of the nonzero |v|. Degenerate ranges widen;
// no usable value gives [0, 1] ([1e-3, 1] for log).
std::pair<double, double> autoRange(ColormapKind kind, ScaleKind scale,
                                    const std::vector<float>& values);

}  // namespace attnscope
