// QCustomPlot items for annotations and the mouse handling of the placing tools (see
// AnnotationLayer.h).
#include "app/plot/AnnotationLayer.h"

#include <qcustomplot.h>

#include <QMouseEvent>

namespace attnscope {
namespace {

const QColor kUserInk(0x10, 0x10, 0x10);
const QColor kUserLabel(0xff, 0xff, 0xff, 0xe0);
const QColor kMarkerInk(0x20, 0x20, 0x20);
const QColor kMarkerLabel(0xff, 0xf3, 0xb0, 0xe8);
constexpr int kClickSlopPx = 4;

QPen inkPen(const Annotation& a) {
  QPen pen(a.automatic ? kMarkerInk : kUserInk, a.automatic ? 1.5 : 2.0);
  if (a.automatic) pen.setStyle(Qt::DashLine);
  return pen;
}

}  // namespace

AnnotationLayer::AnnotationLayer(QCustomPlot* plot) : QObject(plot), plot_(plot) {
  setObjectName(QStringLiteral("annotationLayer"));
  plot_->installEventFilter(this);
}

AnnotationLayer::~AnnotationLayer() = default;

AnnotationLayer* AnnotationLayer::of(QWidget* view) {
  auto* plot = view == nullptr ? nullptr : view->findChild<QCustomPlot*>();
  if (plot == nullptr) return nullptr;
  auto* layer = plot->findChild<AnnotationLayer*>(QString(), Qt::FindDirectChildrenOnly);
  return layer != nullptr ? layer : new AnnotationLayer(plot);
}

void AnnotationLayer::setAnnotations(const QList<Annotation>& annotations) {
  annotations_ = annotations;
  moving_ = -1;
  drawAll();
}

void AnnotationLayer::drawAll() {
  clearItems();
  for (int i = 0; i < annotations_.size(); ++i) {
    draw(annotations_[i]);
    while (owners_.size() < items_.size()) owners_ << i;
  }
  // A hidden plot (a tab behind another) is replotted when it is shown, not on every change.
  replotOnShow_ = !plot_->isVisible();
  if (!replotOnShow_) plot_->replot(QCustomPlot::rpQueuedReplot);
}

void AnnotationLayer::clearItems() {
  for (QCPAbstractItem* item : items_) plot_->removeItem(item);
  items_.clear();
  owners_.clear();
}

int AnnotationLayer::userAnnotationAt(QPoint pixel) const {
  int best = -1;
  double bestDistance = plot_->selectionTolerance();
  for (int i = 0; i < items_.size(); ++i) {
    if (annotations_[owners_[i]].automatic) continue;
    const double d = items_[i]->selectTest(pixel, false);
    if (d >= 0 && d <= bestDistance) {
      best = owners_[i];
      bestDistance = d;
    }
  }
  return best;
}

void AnnotationLayer::draw(const Annotation& a) {
  switch (a.kind) {
    case AnnotationKind::text:
      addLabel(a, a.from, Qt::AlignCenter);
      break;
    case AnnotationKind::arrow: {
      auto* line = new QCPItemLine(plot_);
      line->start->setCoords(a.from);
      line->end->setCoords(a.to);
      line->setPen(inkPen(a));
      line->setHead(QCPLineEnding(QCPLineEnding::esSpikeArrow, 10, 12));
      items_ << line;
      if (!a.text.isEmpty()) addLabel(a, a.from, Qt::AlignCenter);
      break;
    }
    case AnnotationKind::box: {
      auto* rect = new QCPItemRect(plot_);
      rect->topLeft->setCoords(a.from);
      rect->bottomRight->setCoords(a.to);
      rect->setPen(inkPen(a));
      rect->setBrush(a.fill.isValid() ? QBrush(a.fill) : QBrush(Qt::NoBrush));
      items_ << rect;
      if (!a.text.isEmpty()) {
        addLabel(a, QPointF(std::min(a.from.x(), a.to.x()), std::min(a.from.y(), a.to.y())),
                 Qt::AlignLeft | Qt::AlignBottom);
      }
      break;
    }
  }
}

void AnnotationLayer::addLabel(const Annotation& a, QPointF at, Qt::Alignment alignment) {
  auto* label = new QCPItemText(plot_);
  label->position->setCoords(at);
  label->setPositionAlignment(alignment);
  label->setText(a.text);
  label->setFont(QFont(plot_->font().family(), 8));
  label->setColor(a.automatic ? kMarkerInk : kUserInk);
  label->setBrush(QBrush(a.automatic ? kMarkerLabel : kUserLabel));
  label->setPen(QPen(a.automatic ? kMarkerInk : kUserInk, 0.8));
  label->setPadding(QMargins(3, 1, 3, 1));
  items_ << label;
}

void AnnotationLayer::setTool(AnnotationTool tool) {
  tool_ = tool;
  dragging_ = false;
  plot_->setCursor(tool == AnnotationTool::none ? Qt::ArrowCursor : Qt::CrossCursor);
}

QPointF AnnotationLayer::toData(QPoint pixel) const {
  return {plot_->xAxis->pixelToCoord(pixel.x()), plot_->yAxis->pixelToCoord(pixel.y())};
}

QPoint AnnotationLayer::toPixel(QPointF data) const {
  return QPointF(plot_->xAxis->coordToPixel(data.x()), plot_->yAxis->coordToPixel(data.y()))
      .toPoint();
}

void AnnotationLayer::updatePreview(QPointF to) {
  if (preview_ == nullptr) {
    if (tool_ == AnnotationTool::box) {
      auto* rect = new QCPItemRect(plot_);
      rect->setPen(QPen(kUserInk, 1, Qt::DotLine));
      preview_ = rect;
    } else {
      auto* line = new QCPItemLine(plot_);
      line->setPen(QPen(kUserInk, 1, Qt::DotLine));
      line->setHead(QCPLineEnding::esSpikeArrow);
      preview_ = line;
    }
  }
  if (auto* rect = qobject_cast<QCPItemRect*>(preview_)) {
    rect->topLeft->setCoords(pressData_);
    rect->bottomRight->setCoords(to);
  } else if (auto* line = qobject_cast<QCPItemLine*>(preview_)) {
    line->start->setCoords(pressData_);
    line->end->setCoords(to);
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

// Without a tool: drag a user annotation to move it, double-click it to edit its text.
bool AnnotationLayer::moveFilter(QEvent* event) {
  const auto type = event->type();
  if (type != QEvent::MouseButtonPress && type != QEvent::MouseMove &&
      type != QEvent::MouseButtonRelease && type != QEvent::MouseButtonDblClick) {
    return false;
  }
  auto* mouse = static_cast<QMouseEvent*>(event);
  const QPoint pos = mouse->position().toPoint();
  if (type == QEvent::MouseButtonDblClick && mouse->button() == Qt::LeftButton) {
    if (moving_ >= 0) annotations_[moving_] = moveStart_;  // the press did not start a drag
    moving_ = -1;
    const int hit = userAnnotationAt(pos);
    if (hit >= 0) emit editRequested(annotations_[hit]);
    return hit >= 0;
  }
  if (type == QEvent::MouseButtonPress && mouse->button() == Qt::LeftButton) {
    moving_ = userAnnotationAt(pos);
    if (moving_ < 0) return false;
    moveStart_ = annotations_[moving_];
    pressData_ = toData(pos);
    return true;
  }
  if (moving_ < 0) return false;
  const QPointF delta = toData(pos) - pressData_;
  Annotation& a = annotations_[moving_];
  a.from = moveStart_.from + delta;
  a.to = moveStart_.to + delta;
  drawAll();
  if (type == QEvent::MouseButtonRelease) {
    const int index = moving_;
    moving_ = -1;
    if ((pos - toPixel(pressData_)).manhattanLength() > kClickSlopPx) {
      emit moved(moveStart_, annotations_[index]);
    } else {
      annotations_[index] = moveStart_;
      drawAll();
    }
  }
  return true;
}

bool AnnotationLayer::eventFilter(QObject* watched, QEvent* event) {
  if (watched != plot_) return false;
  if (event->type() == QEvent::Show && replotOnShow_) {
    replotOnShow_ = false;
    plot_->replot(QCustomPlot::rpQueuedReplot);
  }
  if (tool_ == AnnotationTool::none) return moveFilter(event);
  const auto type = event->type();
  if (type != QEvent::MouseButtonPress && type != QEvent::MouseMove &&
      type != QEvent::MouseButtonRelease) {
    return false;
  }
  auto* mouse = static_cast<QMouseEvent*>(event);
  const QPoint pos = mouse->position().toPoint();
  if (type == QEvent::MouseButtonPress && mouse->button() == Qt::LeftButton &&
      plot_->axisRect()->rect().contains(pos)) {
    dragging_ = true;
    pressData_ = toData(pos);
  } else if (type == QEvent::MouseMove && dragging_ && tool_ != AnnotationTool::text) {
    updatePreview(toData(pos));
  } else if (type == QEvent::MouseButtonRelease && dragging_) {
    dragging_ = false;
    if (preview_ != nullptr) plot_->removeItem(preview_);
    preview_ = nullptr;
    const QPoint pressPixel = toPixel(pressData_);
    const bool click = (pos - pressPixel).manhattanLength() <= kClickSlopPx;
    Annotation a;
    a.from = pressData_;
    a.to = toData(pos);
    if (tool_ == AnnotationTool::text) {
      a.kind = AnnotationKind::text;
      a.to = a.from;
    } else if (click) {
      plot_->replot(QCustomPlot::rpQueuedReplot);
      return true;  // an arrow or box needs a drag
    } else {
      a.kind = tool_ == AnnotationTool::box ? AnnotationKind::box : AnnotationKind::arrow;
    }
    emit placed(a);
  }
  return true;  // while a tool is active the plot neither pans, zooms by drag nor pins
}

}  // namespace attnscope
