// Gradients, colour-map filling and the scale ticker of a heatmap (see HeatmapLayers.h).
#include "app/plot/HeatmapLayers.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnscope {
namespace {

constexpr CellClass kOverlayClasses[] = {CellClass::nan, CellClass::pos_inf, CellClass::neg_inf,
                                         CellClass::masked};

// Data-map cells along one axis: QCPColorMap gives a cell its width from the distance between
// cell centres, so a single grid cell is drawn as two identical map cells.
struct CellAxis {
  int cells = 0;
  QCPRange centres;
};

CellAxis cellAxis(const std::vector<int64_t>& edges) {
  const int n = static_cast<int>(edges.size()) - 1;
  const double a = static_cast<double>(edges.front()) - 0.5;
  const double b = static_cast<double>(edges.back()) - 0.5;
  CellAxis axis;
  axis.cells = std::max(n, 2);
  const double w = (b - a) / axis.cells;
  axis.centres = QCPRange(a + w / 2, b - w / 2);
  return axis;
}

}  // namespace

QCPColorGradient makeGradient(ColormapKind kind) {
  QCPColorGradient g;
  g.clearColorStops();
  for (const auto& [pos, color] : colormapStops(kind)) g.setColorStopAt(pos, color);
  g.setColorInterpolation(QCPColorGradient::ciRGB);
  g.setLevelCount(350);
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

double overlayPosition(CellClass cls) {
  for (int k = 0; k < 4; ++k) {
    if (kOverlayClasses[k] == cls) return (k + 0.5) / 4.0;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

QCPColorGradient makeOverlayGradient() {
  QCPColorGradient g;
  g.clearColorStops();
  // Four constant bands [k/4, (k+1)/4): cells sit in their band's middle.
  for (int k = 0; k < 4; ++k) {
    const QColor c = overlayColor(kOverlayClasses[k]);
    g.setColorStopAt(k / 4.0 + (k == 0 ? 0.0 : 1e-6), c);
    g.setColorStopAt((k + 1) / 4.0 - (k == 3 ? 0.0 : 1e-6), c);
  }
  g.setLevelCount(400);
  g.setNanHandling(QCPColorGradient::nhTransparent);
  return g;
}

void fillColorMaps(const MatrixGrid& grid, const ColorScale& scale, QCPColorMap* values,
                   QCPColorMap* overlay) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (grid.empty()) {
    values->data()->clear();
    overlay->data()->clear();
    return;
  }
  const CellAxis keys = cellAxis(grid.col_edges);
  const CellAxis rows = cellAxis(grid.row_edges);
  double a = toDisplay(scale.scale, scale.lo, scale.linthresh);
  double b = toDisplay(scale.scale, scale.hi, scale.linthresh);
  if (!std::isfinite(a) || !std::isfinite(b) || !(b > a)) {
    a = std::isfinite(a) ? a : 0.0;
    b = a + 1;
  }
  for (QCPColorMap* map : {values, overlay}) {
    map->data()->setSize(keys.cells, rows.cells);
    map->data()->setRange(keys.centres, rows.centres);
  }
  for (int r = 0; r < rows.cells; ++r) {
    const int64_t gr = static_cast<int64_t>(r) * grid.rows / rows.cells;
    for (int c = 0; c < keys.cells; ++c) {
      const int64_t gc = static_cast<int64_t>(c) * grid.cols / keys.cells;
      const size_t e = static_cast<size_t>(gr * grid.cols + gc);
      if (grid.cls[e] == CellClass::value) {
        const double t = toDisplay(scale.scale, grid.value[e], scale.linthresh);
        values->data()->setCell(c, r, std::isfinite(t) ? std::clamp(t, a, b) : a);
        overlay->data()->setCell(c, r, nan);
      } else {
        values->data()->setCell(c, r, nan);
        overlay->data()->setCell(c, r, overlayPosition(grid.cls[e]));
      }
    }
  }
  values->setDataRange(QCPRange(a, b));
  overlay->setDataRange(QCPRange(0, 1));
}

std::vector<double> displayValues(const MatrixGrid& grid, ScaleKind scale, double linthresh) {
  std::vector<double> out;
  out.reserve(grid.value.size());
  for (size_t e = 0; e < grid.value.size(); ++e) {
    if (grid.cls[e] != CellClass::value) continue;
    const double t = toDisplay(scale, grid.value[e], linthresh);
    if (std::isfinite(t)) out.push_back(t);
  }
  return out;
}

OverlayCells countOverlayCells(const MatrixGrid& grid) {
  OverlayCells n;
  for (CellClass c : grid.cls) {
    n.nan += c == CellClass::nan;
    n.pos_inf += c == CellClass::pos_inf;
    n.neg_inf += c == CellClass::neg_inf;
    n.masked += c == CellClass::masked;
  }
  return n;
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
