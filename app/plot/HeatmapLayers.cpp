// Colour-bar gradient, display values and the scale ticker of a heatmap (see HeatmapLayers.h).
#include "app/plot/HeatmapLayers.h"

#include <cmath>

namespace attnscope {

QCPColorGradient makeGradient(ColormapKind kind) {
  QCPColorGradient g;
  g.clearColorStops();
  for (const auto& [pos, color] : colormapStops(kind)) g.setColorStopAt(pos, color);
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  g.setLevelCount(350);
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

void displayValues(const MatrixGrid& grid, ScaleKind scale, double linthresh,
                   std::vector<double>* out) {
  out->resize(grid.value.size());
  double* d = out->data();
  size_t n = 0;
  const size_t cells = grid.value.size();
  const CellClass* cls = grid.cls.data();
  const float* value = grid.value.data();
  if (scale == ScaleKind::linear) {  // the common case, without a call per cell
    for (size_t e = 0; e < cells; ++e) {
      d[n] = value[e];
      n += cls[e] == CellClass::finite;
    }
  } else {
    for (size_t e = 0; e < cells; ++e) {
      if (cls[e] != CellClass::finite) continue;
      const double t = toDisplay(scale, value[e], linthresh);
      d[n] = t;
      n += std::isfinite(t);
    }
  }
  out->resize(n);
}

void ScaleTicker::setScale(ScaleKind scale, double linthresh) {
  scale_ = scale;
  linthresh_ = linthresh;
}

QString ScaleTicker::getTickLabel(double tick, const QLocale& locale, QChar formatChar,
                                  int precision) {
  if (scale_ == ScaleKind::linear) {
    return QCPAxisTicker::getTickLabel(tick, locale, formatChar, precision);
  }
  return formatNumber(fromDisplay(scale_, tick, linthresh_), 3);
}

}  // namespace attnscope
