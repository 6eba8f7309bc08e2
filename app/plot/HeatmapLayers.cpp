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

// Colour map data filled in bulk: QCPColorMapData::setCell is an out-of-line call per cell
// that also updates the data bounds; this writes the [valueSize x keySize] array directly.
// No members of its own: the map deletes it through the base class (no virtual destructor).
class BulkColorMapData : public QCPColorMapData {
 public:
  BulkColorMapData() : QCPColorMapData(0, 0, QCPRange(0, 1), QCPRange(0, 1)) {}
  // Row-major cells (valueIndex * keySize + keyIndex) after setSize; bounds are the caller's.
  double* cells() { return mData; }
  void finish(const QCPRange& bounds) {
    mDataBounds = bounds;
    mDataModified = true;
  }
};

void useBulkData(QCPColorMap* map) {
  map->setData(new BulkColorMapData, false);  // the map takes ownership
}

void fillColorMaps(const MatrixGrid& grid, const ColorScale& scale, QCPColorMap* values,
                   QCPColorMap* overlay) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (grid.empty()) {
    values->data()->clear();
    overlay->data()->clear();
    overlay->setVisible(false);
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
  auto* vd = static_cast<BulkColorMapData*>(values->data());
  auto* od = static_cast<BulkColorMapData*>(overlay->data());
  for (BulkColorMapData* d : {vd, od}) {
    d->setSize(keys.cells, rows.cells);
    d->setRange(keys.centres, rows.centres);
  }
  // Map column c shows grid column colOf[c] (two map cells per grid cell on a 1-cell axis).
  std::vector<int64_t> colOf(static_cast<size_t>(keys.cells));
  for (int c = 0; c < keys.cells; ++c) colOf[static_cast<size_t>(c)] = c * grid.cols / keys.cells;
  bool anyOverlay = false;
  for (int r = 0; r < rows.cells; ++r) {
    const int64_t gr = static_cast<int64_t>(r) * grid.rows / rows.cells;
    const float* value = grid.value.data() + gr * grid.cols;
    const CellClass* cls = grid.cls.data() + gr * grid.cols;
    double* vrow = vd->cells() + static_cast<size_t>(r) * static_cast<size_t>(keys.cells);
    double* orow = od->cells() + static_cast<size_t>(r) * static_cast<size_t>(keys.cells);
    for (int c = 0; c < keys.cells; ++c) {
      const int64_t gc = colOf[static_cast<size_t>(c)];
      if (cls[gc] == CellClass::value) {
        const double t = toDisplay(scale.scale, value[gc], scale.linthresh);
        vrow[c] = std::isfinite(t) ? std::clamp(t, a, b) : a;
        orow[c] = nan;
      } else {
        vrow[c] = nan;
        orow[c] = overlayPosition(cls[gc]);
        anyOverlay = true;
      }
    }
  }
  vd->finish(QCPRange(a, b));
  od->finish(QCPRange(0, 1));
  values->setDataRange(QCPRange(a, b));
  overlay->setDataRange(QCPRange(0, 1));
  // An overlay without cells is not colourised and drawn at all.
  overlay->setVisible(anyOverlay);
}

void displayValues(const MatrixGrid& grid, ScaleKind scale, double linthresh,
                   std::vector<double>* out) {
  out->clear();
  out->reserve(grid.value.size());
  for (size_t e = 0; e < grid.value.size(); ++e) {
    if (grid.cls[e] != CellClass::value) continue;
    const double t = toDisplay(scale, grid.value[e], linthresh);
    if (std::isfinite(t)) out->push_back(t);
  }
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
