// What a user (or attnscope itself) marks on a plot: text, an arrow or a box in the plot's data
// coordinates (x = column / key j, y = row / query i), scoped to one view of one (batch, head).
// Automatic markers (first non-finite cell, location of the largest |value|) are computed from
// the grid shown and never stored.
#pragma once

#include <QColor>
#include <QJsonObject>
#include <QList>
#include <QPointF>
#include <QString>
#include <optional>

#include "core/view/matrix_grid.h"

namespace attnscope {

enum class AnnotationKind { text, arrow, box };

QString annotationKindName(AnnotationKind kind);  // "text", "arrow", "box"
std::optional<AnnotationKind> annotationKindFromName(const QString& name);

struct Annotation {
  AnnotationKind kind = AnnotationKind::text;
  QString view;  // "S", "P", ... the plot it belongs to
  qint64 batch = 0, head = 0;
  QPointF from;            // text: anchor; arrow: tail; box: one corner
  QPointF to;              // arrow: head (points at this); box: opposite corner
  QString text;            // label (text, and optional for arrow / box)
  bool automatic = false;  // a marker attnscope computed (not saved)
  QColor fill;             // box fill of an automatic marker (invalid: none; not saved)

  bool operator==(const Annotation& o) const;

  // {"kind", "view", "batch", "head", "from": [x, y], "to": [x, y], "text"}. fromJson keeps
  // what it understands and returns nullopt for an entry it cannot use (unknown kind,
  // non-finite or missing coordinates).
  QJsonObject toJson() const;
  static std::optional<Annotation> fromJson(const QJsonObject& json);
};

// Automatic markers of a grid shown as `view`: an arrow at the first non-finite element in
// row-major order ("first NaN (12, 40)", "first +inf ...") and a text marker at the element
// with the largest finite |value| ("max |S| = 7.8e+05 at (12, 40)"). Masked cells are intentional
// and get no marker. Pooled cells mark their block's first element.
QList<Annotation> automaticMarkers(const MatrixGrid& grid, const QString& view, qint64 batch,
                                   qint64 head);

}  // namespace attnscope
