// Draws Annotations on a QCustomPlot as items (text, arrow, box; automatic markers dashed on a
// pale yellow label) and implements the placing tools: with a tool active, a left drag on the
// plot places an arrow or a box and a click places text, instead of panning or pinning. Without
// a tool, a user annotation (not a marker) is moved by dragging it and a double-click on it
// asks for its text to be edited.
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
  // Index in annotations() of the user annotation drawn under a pixel, or -1.
  int userAnnotationAt(QPoint pixel) const;

 signals:
  // The active tool placed something; view / batch / head / text are left for the owner.
  void placed(const attnscope::Annotation& annotation);
  // A user annotation was dragged to a new place (`after` differs only in from / to).
  void moved(const attnscope::Annotation& before, const attnscope::Annotation& after);
  // A user annotation was double-clicked.
  void editRequested(const attnscope::Annotation& annotation);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void clearItems();
  void drawAll();
  void draw(const Annotation& a);
  bool moveFilter(QEvent* event);
  void addLabel(const Annotation& a, QPointF at, Qt::Alignment alignment);
  void updatePreview(QPointF to);

  QCustomPlot* plot_;
  QList<Annotation> annotations_;
  QList<QCPAbstractItem*> items_;
  QList<int> owners_;  // [items_.size()] index in annotations_ of the item's annotation
  QCPAbstractItem* preview_ = nullptr;
  AnnotationTool tool_ = AnnotationTool::none;
  bool replotOnShow_ = false;  // items changed while the plot was hidden
  bool dragging_ = false;
  QPointF pressData_;
  int moving_ = -1;  // annotation being dragged without a tool
  Annotation moveStart_;
};

}  // namespace attnscope
