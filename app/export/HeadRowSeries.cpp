// Row series and threshold lines of one head (see HeadRowSeries.h).
#include "app/export/HeadRowSeries.h"

#include <QObject>

#include "app/export/SettingNames.h"

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

std::vector<RowSeriesKind> allRowSeries() {
  return {RowSeriesKind::m_lse, RowSeriesKind::l, RowSeriesKind::o_norm, RowSeriesKind::dq_norm};
}

QString rowSeriesLabel(RowSeriesKind kind) {
  switch (kind) {
    case RowSeriesKind::m_lse:
      return QObject::tr("row max m and LSE");
    case RowSeriesKind::l:
      return QObject::tr("softmax denominator l");
    case RowSeriesKind::o_norm:
      return QObject::tr("||O_i||");
    case RowSeriesKind::dq_norm:
      return QObject::tr("||dQ_i||");
  }
  return {};
}

QString rowSeriesView(RowSeriesKind kind) {
  switch (kind) {
    case RowSeriesKind::m_lse:
      return QStringLiteral("row m, LSE");
    case RowSeriesKind::l:
      return QStringLiteral("row l");
    case RowSeriesKind::o_norm:
      return QStringLiteral("row ||O_i||");
    case RowSeriesKind::dq_norm:
      return QStringLiteral("row ||dQ_i||");
  }
  return {};
}

std::optional<RowSeriesKind> rowSeriesOfView(const QString& view) {
  for (const RowSeriesKind kind : allRowSeries()) {
    if (rowSeriesView(kind) == view) return kind;
  }
  return std::nullopt;
}

QString rowSeriesTitle(const HeadResult& r, RowSeriesKind kind) {
  return QObject::tr("%1 · b%2 h%3 · %4 %5")
      .arg(rowSeriesLabel(kind))
      .arg(r.request.batch)
      .arg(r.request.head)
      .arg(QString::fromLatin1(precision_name(r.precision)), modeName(r.request.mode()));
}

}  // namespace attnscope
