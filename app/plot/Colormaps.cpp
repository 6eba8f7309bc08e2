// Colormap stop tables, value scales and overlay colours (see Colormaps.h).
#include "app/plot/Colormaps.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace attnscope {
namespace {

std::vector<std::pair<double, QColor>> evenStops(std::initializer_list<QRgb> colors) {
  std::vector<std::pair<double, QColor>> stops;
  const double last = static_cast<double>(colors.size() - 1);
  double i = 0;
  for (QRgb c : colors) stops.emplace_back(i++ / last, QColor(c));
  return stops;
}

int lerp(int a, int b, double f) {
  return static_cast<int>(std::lround(a + (b - a) * f));
}

}  // namespace

QString colormapName(ColormapKind kind) {
  return kind == ColormapKind::sequential ? QStringLiteral("sequential (viridis)")
                                          : QStringLiteral("diverging (blue-white-red)");
}

QString scaleName(ScaleKind kind) {
  switch (kind) {
    case ScaleKind::linear:
      return QStringLiteral("linear");
    case ScaleKind::log:
      return QStringLiteral("log");
    case ScaleKind::symlog:
      return QStringLiteral("symlog");
  }
  return {};
}

const std::vector<std::pair<double, QColor>>& colormapStops(ColormapKind kind) {
  // Viridis sampled at 0, 0.1, ..., 1 (perceptually uniform, dark purple to yellow).
  static const auto sequential =
      evenStops({0x440154, 0x482475, 0x414487, 0x355f8d, 0x2a788e, 0x21918c, 0x22a884, 0x44bf70,
                 0x7ad151, 0xbddf26, 0xfde725});
  // ColorBrewer RdBu reversed: dark blue (negative), near-white (0), dark red (positive).
  static const auto diverging =
      evenStops({0x053061, 0x2166ac, 0x4393c3, 0x92c5de, 0xd1e5f0, 0xf7f7f7, 0xfddbc7, 0xf4a582,
                 0xd6604d, 0xb2182b, 0x67001f});
  return kind == ColormapKind::sequential ? sequential : diverging;
}

QColor colormapColor(ColormapKind kind, double t) {
  const auto& stops = colormapStops(kind);
  if (!(t > 0)) return stops.front().second;
  if (t >= 1) return stops.back().second;
  const auto hi = std::upper_bound(stops.begin(), stops.end(), t,
                                   [](double x, const auto& stop) { return x < stop.first; });
  const auto lo = hi - 1;
  const double f = (t - lo->first) / (hi->first - lo->first);
  const QColor& a = lo->second;
  const QColor& b = hi->second;
  return QColor(lerp(a.red(), b.red(), f), lerp(a.green(), b.green(), f),
                lerp(a.blue(), b.blue(), f));
}

QColor overlayColor(CellClass cls) {
  switch (cls) {
    case CellClass::nan:
      return QColor(0xff, 0x00, 0xff);  // magenta
    case CellClass::pos_inf:
      return QColor(0xff, 0x66, 0x00);  // vivid orange
    case CellClass::neg_inf:
      return QColor(0x00, 0xe5, 0xff);  // vivid cyan
    case CellClass::masked:
      return QColor(0x9a, 0x9a, 0x9a);  // mid grey
    case CellClass::finite:
      break;
  }
  return {};
}

double toDisplay(ScaleKind scale, double v, double linthresh) {
  switch (scale) {
    case ScaleKind::linear:
      return v;
    case ScaleKind::log:
      return std::log10(std::fabs(v));
    case ScaleKind::symlog:
      return std::copysign(std::log10(1.0 + std::fabs(v) / linthresh), v);
  }
  return v;
}

double fromDisplay(ScaleKind scale, double t, double linthresh) {
  switch (scale) {
    case ScaleKind::linear:
      return t;
    case ScaleKind::log:
      return std::pow(10.0, t);
    case ScaleKind::symlog:
      return std::copysign(linthresh * (std::pow(10.0, std::fabs(t)) - 1), t);
  }
  return t;
}

double ColorScale::position(double v) const {
  if (!std::isfinite(v)) return std::numeric_limits<double>::quiet_NaN();
  const double a = toDisplay(scale, lo, linthresh);
  const double b = toDisplay(scale, hi, linthresh);
  const double x = toDisplay(scale, v, linthresh);
  if (!(b > a)) return 0.5;
  return std::clamp((x - a) / (b - a), 0.0, 1.0);
}

QColor ColorScale::colorFor(double v) const {
  if (std::isnan(v)) return overlayColor(CellClass::nan);
  if (std::isinf(v)) return overlayColor(v > 0 ? CellClass::pos_inf : CellClass::neg_inf);
  return colormapColor(map, position(v));
}

QString formatNumber(double v, int significant) {
  if (std::isnan(v)) return QStringLiteral("NaN");
  if (std::isinf(v)) return v > 0 ? QStringLiteral("+inf") : QStringLiteral("-inf");
  return QString::number(v, 'g', significant);
}

namespace {

// Keeps the k smallest values offered (Less = std::less; the k largest with std::greater) in a
// heap whose top is the largest of them; a value that cannot enter costs one comparison.
template <class Less>
class Smallest {
 public:
  explicit Smallest(size_t k) : k_(k) { heap_.reserve(k); }
  void offer(float v) {
    if (heap_.size() < k_) {
      heap_.push_back(v);
      std::push_heap(heap_.begin(), heap_.end(), Less());
    } else if (Less()(v, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), Less());
      heap_.back() = v;
      std::push_heap(heap_.begin(), heap_.end(), Less());
    }
  }
  // The value of 0-based rank r (< the values kept) in Less order.
  float rank(size_t r) {
    std::sort_heap(heap_.begin(), heap_.end(), Less());
    return heap_[r];
  }

 private:
  size_t k_;
  std::vector<float> heap_;
};

}  // namespace

std::pair<double, double> autoRange(ColormapKind kind, ScaleKind scale,
                                    const std::vector<float>& values) {
  const bool log = scale == ScaleKind::log;
  // One pass: count, min, max and the values of the ends that a cut of at most
  // kRangeTailFraction of all values (finite or not) can reach.
  const size_t most = static_cast<size_t>(static_cast<double>(values.size()) * kRangeTailFraction);
  Smallest<std::less<float>> low(log ? 0 : most + 1);
  Smallest<std::greater<float>> high(log ? 0 : most + 1);
  size_t n = 0;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (float f : values) {
    const double v = log ? std::fabs(f) : f;
    if (!std::isfinite(v) || (log && v == 0)) continue;
    ++n;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    if (!log) {
      low.offer(f);
      high.offer(f);
    }
  }
  if (n == 0) return {log ? 1e-3 : 0.0, 1.0};
  if (log) return {lo, hi > lo ? hi : lo * 10};
  // Robust ends: a few extreme cells (one P = 1 among thousands) do not set the range; they
  // take the end colours. A range the quantiles would collapse keeps [min, max].
  const size_t cut = static_cast<size_t>(static_cast<double>(n) * kRangeTailFraction);
  if (cut > 0) {
    const double qlo = low.rank(cut);
    const double qhi = high.rank(cut);
    if (qhi > qlo) {
      lo = qlo;
      hi = qhi;
    }
  }
  if (kind == ColormapKind::diverging) {
    const double m = std::max(std::fabs(lo), std::fabs(hi));
    lo = -m;
    hi = m;
  }
  if (!(hi > lo)) {
    lo -= 0.5;
    hi += 0.5;
  }
  return {lo, hi};
}

int64_t countBeyondRange(const ColorScale& scale, const std::vector<float>& values) {
  const bool log = scale.scale == ScaleKind::log;
  int64_t n = 0;
  for (float f : values) {
    if (!std::isfinite(f)) continue;
    const double v = log ? std::fabs(f) : f;
    if (log && v == 0) continue;
    n += v < scale.lo || v > scale.hi;
  }
  return n;
}

ColormapKind colormapFor(const std::vector<float>& values) {
  bool negative = false, positive = false;
  for (float f : values) {
    if (!std::isfinite(f)) continue;
    negative = negative || f < 0;
    positive = positive || f > 0;
    if (negative && positive) return ColormapKind::diverging;
  }
  return ColormapKind::sequential;
}

}  // namespace attnscope
