// Draws Annotations on a QCustomPlot as items (text, arrow, box; automatic markers dashed on a
// pale yellow label) and implements the placing tools: with a tool active, a left drag on the
// plot places an arrow or a box and a click places text, instead of panning or pinning.
#pragma once

#include <QList>
#include <QObject>
#include <QPointF>

#include "app/plot/Annotation.h"

class QCustomPlot;
class QCPAbstractItem;
class QWidget;

namespace attnscope {

enum class AnnotationTool { none, text, arrow, box };

class AnnotationLayer : public QObject {
  Q_OBJECT

 public:
  // A layer over `plot` (owned by it).
  explicit AnnotationLayer(QCustomPlot* plot);
  ~AnnotationLayer() override;

  // The layer of the QCustomPlot inside `view` (a HeatmapView or RowPlotView), created on first
  // use; nullptr when the widget holds no plot.
  static AnnotationLayer* of(QWidget* view);

  // Replaces what is drawn (user annotations and automatic markers alike).
  void setAnnotations(const QList<Annotation>& annotations);
  const QList<Annotation>& annotations() const { return annotations_; }
  // QCustomPlot items currently drawn (lines, rects, texts).
  int itemCount() const { return items_.size(); }

  void setTool(AnnotationTool tool);
  AnnotationTool tool() const { return tool_; }

  // Data coordinates (x = column, y = row) of a point in the plot widget, and back.
  QPointF toData(QPoint pixel) const;
  QPoint toPixel(QPointF data) const;

 signals:
  // The active tool placed something; view / batch / head / text are left for the owner.
  void placed(const attnscope::Annotation& annotation);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void clearItems();
  void draw(const Annotation& a);
  void addLabel(const Annotation& a, QPointF at, Qt::Alignment alignment);
  void updatePreview(QPointF to);

  QCustomPlot* plot_;
  QList<Annotation> annotations_;
  QList<QCPAbstractItem*> items_;
  QCPAbstractItem* preview_ = nullptr;
  AnnotationTool tool_ = AnnotationTool::none;
  bool dragging_ = false;
  QPointF pressData_;
};

}  // namespace attnscope
