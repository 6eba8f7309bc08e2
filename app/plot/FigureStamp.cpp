// Text forms of a FigureStamp (see FigureStamp.h).
#include "app/plot/FigureStamp.h"

#include <QFileInfo>

namespace attnscope {

QList<QPair<QString, QString>> FigureStamp::fields() const {
  QList<QPair<QString, QString>> pairs{
      {QStringLiteral("view"), view},
      {QStringLiteral("file"), file},
      {QStringLiteral("case"), casePath},
      {QStringLiteral("batch"), QString::number(batch)},
      {QStringLiteral("head"), QString::number(head)},
      {QStringLiteral("precision"), precision},
      {QStringLiteral("mode"), mode},
      {QStringLiteral("scale"), QString::number(scale, 'g', 8)},
      {QStringLiteral("clip"), clip},
      {QStringLiteral("mask fill"), maskFill},
  };
  if (!findings.isEmpty())
    pairs.append({QStringLiteral("findings"), findings.join(QStringLiteral("; "))});
  return pairs;
}

QString FigureStamp::firstLine() const {
  return QStringLiteral("%1 · %2 · %3 · batch %4 · head %5")
      .arg(view, QFileInfo(file).fileName(), casePath)
      .arg(batch)
      .arg(head);
}

QString FigureStamp::secondLine() const {
  return QStringLiteral("%1 %2 · scale %3 · clip %4 · mask %5")
      .arg(precision, mode)
      .arg(scale, 0, 'g', 8)
      .arg(clip, maskFill);
}

QString FigureStamp::oneLine() const {
  QStringList parts;
  for (const auto& [label, value] : fields()) parts << label + QStringLiteral(" ") + value;
  return QStringLiteral("attnscope: ") + parts.join(QStringLiteral("; "));
}

QJsonObject FigureStamp::toJson() const {
  QJsonObject json;
  for (const auto& [label, value] : fields()) json[label] = value;
  json[QStringLiteral("batch")] = batch;
  json[QStringLiteral("head")] = head;
  json[QStringLiteral("scale")] = scale;
  return json;
}

}  // namespace attnscope
