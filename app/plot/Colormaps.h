// Perceptual colormaps (viridis-like sequential, blue-white-red diverging), the linear / log /
// symlog value scales, and the overlay colours that keep NaN, +inf, -inf and masked apart.
// Qt Gui only (no QCustomPlot): the heatmap builds its gradients from these stops.
#pragma once

#include <QColor>
#include <QString>
#include <optional>
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

// Colour of an overlay class (CellClass::finite has none: invalid QColor). None of them is a
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

// What the user chose for a heatmap's colours (what the sidecar keeps per tab): a colormap
// (none: the one the values call for, colormapFor), the scale, and a fixed range in data units
// (none: automatic, autoRange).
struct HeatmapColours {
  std::optional<ColormapKind> colormap;
  ScaleKind scale = ScaleKind::linear;
  std::optional<std::pair<double, double>> range;

  bool operator==(const HeatmapColours& o) const {
    return colormap == o.colormap && scale == o.scale && range == o.range;
  }
  bool operator!=(const HeatmapColours& o) const { return !(*this == o); }
};

// Number format of axes, range entries and readouts: "65504", "1.25e-05", "NaN", "+inf".
QString formatNumber(double v, int significant = 4);

// Share of the finite values left out at each end of an automatic linear / symlog range.
inline constexpr double kRangeTailFraction = 0.001;

// Automatic range of finite values: linear and symlog scales span the 0.1 % to 99.9 %
// quantiles (all of [min, max] when that collapses or for under 1000 values), symmetric around
// 0 for diverging maps; log scales use [min, max] of the nonzero |v|. Degenerate ranges widen;
// no usable value gives [0, 1] ([1e-3, 1] for log).
std::pair<double, double> autoRange(ColormapKind kind, ScaleKind scale,
                                    const std::vector<float>& values);
// Finite values outside the scale's [lo, hi] (for log scales |v| outside it; zeros are not
// counted): what an automatic range leaves to the end colours.
int64_t countBeyondRange(const ColorScale& scale, const std::vector<float>& values);

// The map that shows the values' structure: diverging around 0 when they take both signs,
// sequential when they are one-signed (S of 41..51, P, norms).
ColormapKind colormapFor(const std::vector<float>& values);

}  // namespace attnscope
