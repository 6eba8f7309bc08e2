// Row series and threshold lines of one head (see HeadRowSeries.h).
#include "app/gui/HeadRowSeries.h"

#include <QObject>

namespace attnscope {
namespace {

// exp(x) underflows fp32 below log(FLT_MIN) ~ -87.3 and overflows above 88.72; -88.7 is the
// line DESIGN §4 uses for an LSE that breaks a recomputation.
constexpr double kExpLimit = -88.7;
constexpr double kFp16Max = 65504.0;

const QColor kThresholdRed(0xc0, 0x20, 0x20);
const QColor kThresholdGrey(0x60, 0x60, 0x60);

}  // namespace

HeadRowSeries head_row_series(const HeadResult& r, RowSeriesKind kind) {
  HeadRowSeries out;
  const bool fp16 = r.precision == Precision::f16;
  const Threshold fp16Max{QObject::tr("fp16 max 65504"), kFp16Max, kThresholdRed};
  switch (kind) {
    case RowSeriesKind::m_lse:
      out.series.push_back({QObject::tr("m (row max)"), r.m, QColor(0x1f, 0x77, 0xb4)});
      out.series.push_back({QObject::tr("LSE"), r.lse, QColor(0xd6, 0x27, 0x28)});
      out.thresholds.push_back(
          {QObject::tr("-88.7 (exp range of fp32)"), kExpLimit, kThresholdGrey});
      if (fp16) {
        out.thresholds.push_back(fp16Max);
        out.thresholds.push_back({QObject::tr("-65504"), -kFp16Max, kThresholdRed});
      }
      break;
    case RowSeriesKind::l:
      out.series.push_back({QObject::tr("l"), r.l, QColor(0x2c, 0xa0, 0x2c)});
      break;
    case RowSeriesKind::o_norm:
      out.series.push_back({QObject::tr("||O_i||"), r.o_norm, QColor(0x94, 0x67, 0xbd)});
      if (fp16) out.thresholds.push_back(fp16Max);
      break;
    case RowSeriesKind::dq_norm:
      out.series.push_back({QObject::tr("||dQ_i||"), r.dq_norm, QColor(0x8c, 0x56, 0x4b)});
      if (fp16) out.thresholds.push_back(fp16Max);
      break;
  }
  return out;
}

}  // namespace attnscope
