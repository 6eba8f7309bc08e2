// Severity colours and badges (see SeverityStyle.h).
#include "app/panels/SeverityStyle.h"

#include <QPainter>
#include <QPixmap>

namespace attnscope {
namespace {

constexpr int kBadgePx = 12;

QIcon dot(const QColor& fill, const QColor& ring) {
  QPixmap pixmap(kBadgePx, kBadgePx);
  pixmap.fill(Qt::transparent);
  QPainter painter(&pixmap);
  painter.setRenderHint(QPainter::Antialiasing);
  painter.setPen(QPen(ring, 1.5));
  painter.setBrush(fill);
  painter.drawEllipse(QRectF(1.5, 1.5, kBadgePx - 3, kBadgePx - 3));
  return QIcon(pixmap);
}

}  // namespace

QColor severityColor(Severity s) {
  switch (s) {
    case Severity::error:
      return QColor(0xc0, 0x20, 0x20);
    case Severity::warning:
      return QColor(0xc0, 0x80, 0x00);
    case Severity::info:
      break;
  }
  return QColor(0x40, 0x60, 0xa0);
}

QIcon severityBadge(std::optional<Severity> worst) {
  const QColor fill = worst ? severityColor(*worst) : QColor(0x30, 0x90, 0x40);
  return dot(fill, fill.darker(130));
}

QIcon pendingBadge() {
  return dot(Qt::transparent, QColor(0x90, 0x90, 0x90));
}

QIcon unscannableBadge() {
  return dot(QColor(0x90, 0x90, 0x90), QColor(0x60, 0x60, 0x60));
}

}  // namespace attnscope
