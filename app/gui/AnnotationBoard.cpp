// The annotations the views share (see AnnotationBoard.h).
#include "app/gui/AnnotationBoard.h"

namespace attnscope {

QList<Annotation> AnnotationBoard::userAnnotations(const QString& view) const {
  QList<Annotation> mine;
  for (const Annotation& a : drawn_.value(view)) {
    if (!a.automatic) mine << a;
  }
  return mine;
}

void AnnotationBoard::publish(const QList<Annotation>& caseAnnotations,
                              const QMap<QString, QList<Annotation>>& drawn) {
  case_ = caseAnnotations;
  drawn_ = drawn;
  emit changed();
}

void AnnotationBoard::setTool(AnnotationTool tool) {
  if (tool == tool_) return;
  tool_ = tool;
  emit toolChanged(tool);
}

bool AnnotationBoard::place(const QString& view, const Annotation& placed) {
  return editor_.place && editor_.place(view, placed);
}

bool AnnotationBoard::replace(const Annotation& before, const Annotation& after) {
  return editor_.replace && editor_.replace(before, after);
}

bool AnnotationBoard::remove(const Annotation& annotation) {
  return editor_.remove && editor_.remove(annotation);
}

void AnnotationBoard::editText(const Annotation& annotation) {
  if (editor_.editText) editor_.editText(annotation);
}

}  // namespace attnscope
