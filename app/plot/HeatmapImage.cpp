// Colour table and image plottable of a heatmap (see HeatmapImage.h).
#include "app/plot/HeatmapImage.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace attnscope {
namespace {

constexpr int kMaxImageSide = 8192;  // device pixels per axis (a 4x export of a big plot fits)

// Ranks of the classes a shared pixel chooses between: masked < finite (by |x|) < -inf < +inf
// < NaN, the order in which a pooled cell keeps its elements' classes.
constexpr uint32_t kRankMasked = 0;
constexpr uint32_t kRankNegInf = 0xfffffffdu;
constexpr uint32_t kRankPosInf = 0xfffffffeu;
constexpr uint32_t kRankNan = 0xffffffffu;

// Finite |v| ordered by its bit pattern (IEEE floats of one sign sort like their bits), shifted
// above kRankMasked.
uint32_t valueRank(float v) {
  const float a = std::fabs(v);
  uint32_t bits = 0;
  std::memcpy(&bits, &a, sizeof bits);
  return std::min<uint32_t>(bits, 0x7f7fffffu) + 1;
}

// The cell holding the element under coordinate x (element i spans [i - 0.5, i + 0.5)); -1
// before the grid, cells after it.
int cellAt(double x, const std::vector<int64_t>& edges) {
  const double e = std::floor(x + 0.5);
  if (!(e >= static_cast<double>(edges.front()))) return -1;
  if (e >= static_cast<double>(edges.back())) return static_cast<int>(edges.size()) - 1;
  const auto element = static_cast<int64_t>(e);
  return static_cast<int>(std::upper_bound(edges.begin(), edges.end(), element) - edges.begin()) -
         1;
}

}  // namespace

ColorLut::ColorLut(const ColorScale& scale) : scale_(scale.scale), linthresh_(scale.linthresh) {
  lo_ = toDisplay(scale.scale, scale.lo, scale.linthresh);
  hi_ = toDisplay(scale.scale, scale.hi, scale.linthresh);
  if (!std::isfinite(lo_) || !std::isfinite(hi_) || !(hi_ > lo_)) {
    lo_ = std::isfinite(lo_) ? lo_ : 0.0;
    hi_ = lo_ + 1;
  }
  perUnit_ = (kSize - 1) / (hi_ - lo_);
  for (int k = 0; k < kSize; ++k) {
    table_[k] = colormapColor(scale.map, static_cast<double>(k) / (kSize - 1)).rgba();
  }
}

HeatmapImage::HeatmapImage(QCPAxis* keyAxis, QCPAxis* valueAxis)
    : QCPAbstractPlottable(keyAxis, valueAxis) {
  setSelectable(QCP::stNone);
  setAntialiased(false);
}

void HeatmapImage::setGrid(std::shared_ptr<const MatrixGrid> grid) {
  grid_ = std::move(grid);
  colored_ = false;
  imageValid_ = false;
}

void HeatmapImage::setColorScale(const ColorScale& scale) {
  scale_ = scale;
  colored_ = false;
  imageValid_ = false;
}

QRgb HeatmapImage::cellColor(int64_t cell) {
  if (!grid_ || cell < 0 || cell >= grid_->rows * grid_->cols) return 0;
  if (!colored_) colorize();
  return colors_[static_cast<size_t>(cell)];
}

double HeatmapImage::selectTest(const QPointF&, bool, QVariant*) const {
  return -1;  // never selected: clicks go to the view's pin / pan handling
}

QCPRange HeatmapImage::getKeyRange(bool& foundRange, QCP::SignDomain) const {
  foundRange = grid_ && !grid_->empty();
  if (!foundRange) return {};
  return QCPRange(static_cast<double>(grid_->col_edges.front()) - 0.5,
                  static_cast<double>(grid_->col_edges.back()) - 0.5);
}

QCPRange HeatmapImage::getValueRange(bool& foundRange, QCP::SignDomain, const QCPRange&) const {
  foundRange = grid_ && !grid_->empty();
  if (!foundRange) return {};
  return QCPRange(static_cast<double>(grid_->row_edges.front()) - 0.5,
                  static_cast<double>(grid_->row_edges.back()) - 0.5);
}

void HeatmapImage::colorize() {
  colored_ = true;
  const MatrixGrid& g = *grid_;
  const ColorLut lut(scale_);
  const size_t n = g.cls.size();
  colors_.resize(n);
  ranks_.resize(n);
  for (size_t e = 0; e < n; ++e) {
    const CellClass cls = g.cls[e];
    if (cls == CellClass::finite) {
      colors_[e] = lut.color(g.value[e]);
      ranks_[e] = valueRank(g.value[e]);
      continue;
    }
    colors_[e] = overlayColor(cls).rgba();
    ranks_[e] = cls == CellClass::nan       ? kRankNan
                : cls == CellClass::pos_inf ? kRankPosInf
                : cls == CellClass::neg_inf ? kRankNegInf
                                            : kRankMasked;
  }
}

std::vector<HeatmapImage::Span> HeatmapImage::spans(const QCPAxis* axis, int pixel0, int pixels,
                                                    double scale,
                                                    const std::vector<int64_t>& edges) const {
  // Boundary i sits at the centre of device pixel i; pixel i shows the cells from the one at
  // its centre up to the one before the cell at the next pixel's centre (a partition).
  std::vector<int> at(static_cast<size_t>(pixels) + 1);
  for (int i = 0; i <= pixels; ++i) {
    at[static_cast<size_t>(i)] = cellAt(axis->pixelToCoord(pixel0 + (i + 0.5) / scale), edges);
  }
  const int cells = static_cast<int>(edges.size()) - 1;
  std::vector<Span> out(static_cast<size_t>(pixels));
  for (int i = 0; i < pixels; ++i) {
    const int a = at[static_cast<size_t>(i)], b = at[static_cast<size_t>(i) + 1];
    const int lo = std::max(b < a ? b + 1 : a, 0);
    const int hi = std::min(b > a ? b - 1 : a, cells - 1);
    if (lo <= hi) out[static_cast<size_t>(i)] = {lo, hi};
  }
  return out;
}

QRgb HeatmapImage::pick(const Span& rows, const Span& cols) const {
  const auto cols_n = static_cast<size_t>(grid_->cols);
  size_t best = static_cast<size_t>(rows.first) * cols_n + static_cast<size_t>(cols.first);
  for (int r = rows.first; r <= rows.last; ++r) {
    for (int c = cols.first; c <= cols.last; ++c) {
      const size_t e = static_cast<size_t>(r) * cols_n + static_cast<size_t>(c);
      if (ranks_[e] > ranks_[best]) best = e;
    }
  }
  return colors_[best];
}

void HeatmapImage::render(const QRect& area, double scale) {
  const int w = std::clamp(static_cast<int>(std::lround(area.width() * scale)), 1, kMaxImageSide);
  const int h = std::clamp(static_cast<int>(std::lround(area.height() * scale)), 1, kMaxImageSide);
  const double sx = w / static_cast<double>(std::max(area.width(), 1));
  const double sy = h / static_cast<double>(std::max(area.height(), 1));
  if (image_.size() != QSize(w, h)) image_ = QImage(w, h, QImage::Format_ARGB32_Premultiplied);
  const std::vector<Span> xs = spans(mKeyAxis.data(), area.left(), w, sx, grid_->col_edges);
  const std::vector<Span> ys = spans(mValueAxis.data(), area.top(), h, sy, grid_->row_edges);
  const auto cols_n = static_cast<size_t>(grid_->cols);
  for (int y = 0; y < h; ++y) {
    auto* line = reinterpret_cast<QRgb*>(image_.scanLine(y));
    const Span& rows = ys[static_cast<size_t>(y)];
    if (y > 0 && rows.first == ys[y - 1].first && rows.last == ys[y - 1].last) {
      std::memcpy(line, image_.constScanLine(y - 1), static_cast<size_t>(w) * sizeof(QRgb));
      continue;
    }
    if (rows.first < 0) {
      std::fill(line, line + w, QRgb{0});
      continue;
    }
    const QRgb* rowColors = colors_.data() + static_cast<size_t>(rows.first) * cols_n;
    for (int x = 0; x < w; ++x) {
      const Span& cols = xs[static_cast<size_t>(x)];
      if (cols.first < 0) {
        line[x] = 0;
      } else if (rows.first == rows.last && cols.first == cols.last) {
        line[x] = rowColors[cols.first];
      } else {
        line[x] = pick(rows, cols);
      }
    }
  }
  imageArea_ = area;
  imageScale_ = scale;
  imageKeys_ = mKeyAxis->range();
  imageRows_ = mValueAxis->range();
  imageValid_ = true;
}

void HeatmapImage::draw(QCPPainter* painter) {
  if (!grid_ || grid_->empty() || !mKeyAxis || !mValueAxis) return;
  if (!colored_) colorize();
  const QRect area = clipRect();
  if (area.isEmpty()) return;
  // Render at the device's resolution (a 2x PNG export gets 2x pixels).
  const double scale = std::clamp(std::fabs(painter->deviceTransform().m11()), 1.0, 4.0);
  if (!imageValid_ || area != imageArea_ || scale != imageScale_ ||
      mKeyAxis->range() != imageKeys_ || mValueAxis->range() != imageRows_) {
    render(area, scale);
  }
  painter->save();
  painter->setRenderHint(QPainter::SmoothPixmapTransform, false);
  painter->drawImage(QRectF(area), image_);
  painter->restore();
}

void HeatmapImage::drawLegendIcon(QCPPainter* painter, const QRectF& rect) const {
  painter->fillRect(rect, colormapColor(scale_.map, 0.5));
}

}  // namespace attnscope
