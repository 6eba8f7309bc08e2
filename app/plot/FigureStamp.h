// The provenance printed under every exported figure and stored in its metadata: which view of
// which dump, case, batch / head, and the what-if settings that produced it.
#pragma once

#include <QJsonObject>
#include <QList>
#include <QPair>
#include <QString>
#include <QStringList>

namespace attnscope {

struct FigureStamp {
  QString view;      // "S", "P", "dP", "dS", "O", "dQ", "LSE", ...
  QString file;      // absolute path of the dump
  QString casePath;  // "/fp16_score_overflow"
  qint64 batch = 0, head = 0;
  QString precision;                     // "fp16"
  QString mode;                          // "fused" / "unfused"
  double scale = 0;                      // the softmax scale that ran
  QString clip = QStringLiteral("off");  // clip_grad_norm_ max norm, or "off"
  QString maskFill;                      // "-inf", "-1e9", "finfo.min", "safe"
  // The caption: what the findings say of the case, one line each, worst first ("error
  // score_overflow S b0 h3: ..."); drawn under the footer, empty in a figure without findings.
  QStringList findings;

  bool empty() const { return file.isEmpty(); }

  // Ordered (label, value) pairs: view, file, case, batch, head, precision, mode, scale, clip,
  // mask fill, findings (when any, joined by "; "). The same pairs feed the figure's footer,
  // its metadata and the index page.
  QList<QPair<QString, QString>> fields() const;
  // Two footer lines: "S · seed_cases.h5 · /case · batch 0 · head 3" and
  // "fp16 unfused · scale 0.125 · clip off · mask -inf".
  QString firstLine() const;
  QString secondLine() const;
  // One line holding every field (PDF / SVG title, PNG text chunk).
  QString oneLine() const;
  QJsonObject toJson() const;
};

}  // namespace attnscope
