// Annotation JSON form and the automatic markers of a grid (see Annotation.h).
#include "app/plot/Annotation.h"

#include <QJsonArray>
#include <algorithm>
#include <cmath>

namespace attnscope {
namespace {

QJsonArray pointJson(QPointF p) {
  return {p.x(), p.y()};
}

std::optional<QPointF> pointFromJson(const QJsonValue& value) {
  const QJsonArray a = value.toArray();
  if (a.size() != 2 || !a[0].isDouble() || !a[1].isDouble()) return std::nullopt;
  const double x = a[0].toDouble(), y = a[1].toDouble();
  if (!std::isfinite(x) || !std::isfinite(y)) return std::nullopt;
  return QPointF(x, y);
}

// Where a marker's label sits: up and to the right of the element, flipped back inside the
// matrix near its right / top edge (y grows downwards: row 0 is the top row).
QPointF labelPoint(const MatrixGrid& g, double row, double col) {
  // Within the part of the matrix the grid covers (a zoomed window, or all of it), so the label
  // and its arrow stay inside the plot of that grid.
  const double r0 = static_cast<double>(g.row_edges.front());
  const double r1 = static_cast<double>(g.row_edges.back()) - 1;
  const double c0 = static_cast<double>(g.col_edges.front());
  const double c1 = static_cast<double>(g.col_edges.back()) - 1;
  const double dx = std::max(2.0, 0.12 * (c1 - c0 + 1));
  const double dy = std::max(2.0, 0.10 * (r1 - r0 + 1));
  const double x = col + dx <= c1 ? col + dx : col - dx;
  const double y = row - dy >= r0 ? row - dy : row + dy;
  return {std::clamp(x, c0, std::max(c0, c1)), std::clamp(y, r0, std::max(r0, r1))};
}

}  // namespace

QString annotationKindName(AnnotationKind kind) {
  switch (kind) {
    case AnnotationKind::text:
      return QStringLiteral("text");
    case AnnotationKind::arrow:
      return QStringLiteral("arrow");
    case AnnotationKind::box:
      return QStringLiteral("box");
  }
  return {};
}

std::optional<AnnotationKind> annotationKindFromName(const QString& name) {
  for (AnnotationKind k : {AnnotationKind::text, AnnotationKind::arrow, AnnotationKind::box}) {
    if (annotationKindName(k) == name) return k;
  }
  return std::nullopt;
}

bool Annotation::operator==(const Annotation& o) const {
  return kind == o.kind && view == o.view && batch == o.batch && head == o.head && from == o.from &&
         to == o.to && text == o.text && automatic == o.automatic && fill == o.fill;
}

QJsonObject Annotation::toJson() const {
  return {{QStringLiteral("kind"), annotationKindName(kind)},
          {QStringLiteral("view"), view},
          {QStringLiteral("batch"), batch},
          {QStringLiteral("head"), head},
          {QStringLiteral("from"), pointJson(from)},
          {QStringLiteral("to"), pointJson(to)},
          {QStringLiteral("text"), text}};
}

std::optional<Annotation> Annotation::fromJson(const QJsonObject& json) {
  const auto kind = annotationKindFromName(json.value(QStringLiteral("kind")).toString());
  const auto from = pointFromJson(json.value(QStringLiteral("from")));
  if (!kind || !from) return std::nullopt;
  Annotation a;
  a.kind = *kind;
  a.view = json.value(QStringLiteral("view")).toString();
  a.batch = json.value(QStringLiteral("batch")).toInteger();
  a.head = json.value(QStringLiteral("head")).toInteger();
  a.from = *from;
  a.to = pointFromJson(json.value(QStringLiteral("to"))).value_or(*from);
  a.text = json.value(QStringLiteral("text")).toString();
  if (a.view.isEmpty() || a.batch < 0 || a.head < 0) return std::nullopt;
  return a;
}

QList<Annotation> automaticMarkers(const MatrixGrid& grid, const QString& view, qint64 batch,
                                   qint64 head) {
  QList<Annotation> markers;
  if (grid.empty()) return markers;
  // The first non-finite cell (masked cells are no fault) and the first cell of the largest
  // finite |value|; branch-free passes over the class and value arrays.
  const std::vector<CellClass>& cls = grid.cls;
  const int64_t cells = grid.rows * grid.cols;
  const auto bad = std::find_if(cls.begin(), cls.begin() + cells, [](CellClass c) {
    return c != CellClass::finite && c != CellClass::masked;
  });
  const int64_t firstBad = bad == cls.begin() + cells ? -1 : bad - cls.begin();
  float maxAbs = -1;
  for (int64_t n = 0; n < cells; ++n) {
    const size_t i = static_cast<size_t>(n);
    maxAbs = std::max(maxAbs, cls[i] == CellClass::finite ? std::fabs(grid.value[i]) : -1.f);
  }
  int64_t maxCell = -1;
  for (int64_t n = 0; maxAbs >= 0 && maxCell < 0; ++n) {
    const size_t i = static_cast<size_t>(n);
    if (cls[i] == CellClass::finite && std::fabs(grid.value[i]) == maxAbs) maxCell = n;
  }
  auto marker = [&](int64_t cell, const QString& text) {
    const int64_t r = cell / grid.cols, c = cell % grid.cols;
    const double row = static_cast<double>(grid.row_edges[static_cast<size_t>(r)]);
    const double col = static_cast<double>(grid.col_edges[static_cast<size_t>(c)]);
    Annotation a;
    a.kind = AnnotationKind::arrow;
    a.view = view;
    a.batch = batch;
    a.head = head;
    a.to = QPointF(col, row);
    a.from = labelPoint(grid, row, col);
    a.text =
        text +
        QStringLiteral(" at (%1, %2)").arg(static_cast<qint64>(row)).arg(static_cast<qint64>(col));
    a.automatic = true;
    markers << a;
  };
  if (firstBad >= 0) {
    const CellClass cls = grid.cls[static_cast<size_t>(firstBad)];
    marker(firstBad, QStringLiteral("first %1").arg(QString::fromLatin1(cell_class_name(cls))));
  }
  if (maxCell >= 0) {
    marker(maxCell, QStringLiteral("max |%1| = %2").arg(view).arg(maxAbs, 0, 'g', 4));
  }
  return markers;
}

}  // namespace attnscope
