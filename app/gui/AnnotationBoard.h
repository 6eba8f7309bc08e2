// The annotations every view shares through the SessionContext: what each named view (a heatmap
// tab, a row-plot series) draws, the user annotations of the selected case, the placing tool,
// and the edits the views and the annotation list ask for. The AnnotationController publishes
// what is drawn and carries out the edits (its sidecar holds the annotations); panels only read
// the board and ask it.
#pragma once

#include <QList>
#include <QMap>
#include <QObject>
#include <QString>
#include <functional>

#include "app/plot/Annotation.h"
#include "app/plot/AnnotationLayer.h"

namespace attnscope {

// How the keeper of the annotations carries out the user's edits; each returns whether it did.
struct AnnotationEditor {
  // Adds an annotation placed on `view` at the shown (batch, head).
  std::function<bool(const QString& view, const Annotation& placed)> place;
  std::function<bool(const Annotation& before, const Annotation& after)> replace;
  std::function<bool(const Annotation& annotation)> remove;
  // Asks for the text of an annotation (a dialog; the edit follows as a replace).
  std::function<void(const Annotation& annotation)> editText;
};

class AnnotationBoard : public QObject {
  Q_OBJECT

 public:
  explicit AnnotationBoard(QObject* parent = nullptr) : QObject(parent) {}

  // Every user annotation of the selected case (all views, batches and heads), in order.
  const QList<Annotation>& caseAnnotations() const { return case_; }
  // What `view` draws at the shown (batch, head): its user annotations, then the automatic
  // markers when they are on; and its user annotations alone.
  QList<Annotation> drawn(const QString& view) const { return drawn_.value(view); }
  QList<Annotation> userAnnotations(const QString& view) const;
  AnnotationTool tool() const { return tool_; }

  // The keeper's side: publishing emits changed(), a new tool toolChanged().
  void publish(const QList<Annotation>& caseAnnotations,
               const QMap<QString, QList<Annotation>>& drawn);
  void setTool(AnnotationTool tool);
  void setEditor(AnnotationEditor editor) { editor_ = std::move(editor); }

  // The user's edits (false when nobody keeps the annotations or the keeper refused).
  bool place(const QString& view, const Annotation& placed);
  bool replace(const Annotation& before, const Annotation& after);
  bool remove(const Annotation& annotation);
  void editText(const Annotation& annotation);

 signals:
  void changed();
  void toolChanged(attnscope::AnnotationTool tool);

 private:
  QList<Annotation> case_;
  QMap<QString, QList<Annotation>> drawn_;
  AnnotationTool tool_ = AnnotationTool::none;
  AnnotationEditor editor_;
};

}  // namespace attnscope
