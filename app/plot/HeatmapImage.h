// The heatmap's image: a QCustomPlot plottable that draws a MatrixGrid as one QImage at the
// axis rect's device resolution. Cells take their colour from a 257-entry table of the colormap
// over the colour scale's display range (linear / log / symlog); NaN, +inf, -inf and masked cells
// take their overlay colours. Cell c of an axis spans elements [edges[c], edges[c + 1]), i.e.
// coordinates [edges[c] - 0.5, edges[c + 1] - 0.5) (non-uniform pooled edges drawn as they are).
// Pixels partition the cells: where several cells fall into one pixel, it shows the one a pooled
// cell keeps (NaN, then +inf, then -inf, then the finite value of largest |x|, then masked), so
// a single NaN stays visible at any zoom. Colours are computed when drawn, not when set.
#pragma once

#include <qcustomplot.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "app/plot/Colormaps.h"
#include "core/view/matrix_grid.h"

namespace attnscope {

// The colours of a colour scale: table[k] = colour of position k / (size - 1), and the display
// range [lo, hi] it stretches over (degenerate or non-finite ranges widened to [lo, lo + 1]).
class ColorLut {
 public:
  static constexpr int kSize = 257;

  explicit ColorLut(const ColorScale& scale);
  // Premultiplied ARGB of a finite data value (clamped to the range; log of 0 gives lo).
  QRgb color(double v) const {
    const double t = scale_ == ScaleKind::linear ? v : toDisplay(scale_, v, linthresh_);
    const double x = (t - lo_) * perUnit_;
    return table_[x > 0 ? (x < kSize - 1 ? static_cast<int>(x + 0.5) : kSize - 1) : 0];
  }
  double lo() const { return lo_; }
  double hi() const { return hi_; }

 private:
  ScaleKind scale_;
  double linthresh_;
  double lo_, hi_;
  double perUnit_;  // table steps per display unit
  QRgb table_[kSize];
};

class HeatmapImage : public QCPAbstractPlottable {
  Q_OBJECT

 public:
  HeatmapImage(QCPAxis* keyAxis, QCPAxis* valueAxis);

  // Key axis = grid columns, value axis = grid rows.
  void setGrid(std::shared_ptr<const MatrixGrid> grid);
  void setColorScale(const ColorScale& scale);

  // Premultiplied ARGB the cell is drawn in (transparent for an empty grid or a bad index).
  QRgb cellColor(int64_t cell);

  double selectTest(const QPointF& pos, bool onlySelectable,
                    QVariant* details = nullptr) const override;
  QCPRange getKeyRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth) const override;
  QCPRange getValueRange(bool& foundRange, QCP::SignDomain inSignDomain = QCP::sdBoth,
                         const QCPRange& inKeyRange = QCPRange()) const override;

 protected:
  void draw(QCPPainter* painter) override;
  void drawLegendIcon(QCPPainter* painter, const QRectF& rect) const override;

 private:
  // The cells [first, last] one pixel shows on an axis (first = -1: none).
  struct Span {
    int first = -1, last = -1;
  };
  void colorize();
  std::vector<Span> spans(const QCPAxis* axis, int pixel0, int pixels, double scale,
                          const std::vector<int64_t>& edges) const;
  void render(const QRect& area, double scale);
  QRgb pick(const Span& rows, const Span& cols) const;

  std::shared_ptr<const MatrixGrid> grid_;
  ColorScale scale_;
  bool colored_ = false;         // colors_ / ranks_ match grid_ and scale_
  std::vector<QRgb> colors_;     // [rows x cols] premultiplied ARGB
  std::vector<uint32_t> ranks_;  // [rows x cols] which cell a shared pixel shows (larger wins)
  QImage image_;                 // last rendering and what it was rendered for
  QRect imageArea_;
  QCPRange imageKeys_, imageRows_;
  double imageScale_ = 0;
  bool imageValid_ = false;
};

}  // namespace attnscope
