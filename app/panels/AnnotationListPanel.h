// Annotation list dock: every user annotation of the current case (kind, text, view, batch /
// head, position). Selecting one shows it through the SessionContext: its batch / head, and for
// a heatmap annotation its tab and a zoom around it (showRegion), for a row-plot one the row
// plot dock raised on its series (showRowSeries);
// the text column is editable in place; Delete (button or key) removes the selected one. Every
// change is asked of the context's AnnotationBoard (the AnnotationController keeps the sidecar).
#pragma once

#include <QList>
#include <QWidget>

#include "app/plot/Annotation.h"

class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;

namespace attnscope {

class SessionContext;

class AnnotationListPanel : public QWidget {
  Q_OBJECT

 public:
  explicit AnnotationListPanel(SessionContext* context, QWidget* parent = nullptr);

  QTreeWidget* tree() const { return tree_; }
  // The annotations listed, in row order.
  const QList<Annotation>& listed() const { return listed_; }
  // Removes the selected annotation; false when nothing is selected.
  bool deleteSelected();

  // "(12, 40)" for text, "(12, 40) -> (30, 2)" for arrows and boxes: (row, col) as y, x.
  static QString positionText(const Annotation& a);

 private:
  void rebuild();
  void onItemChanged(QTreeWidgetItem* item, int column);
  void showAnnotation(QTreeWidgetItem* item);

  SessionContext* context_;
  QTreeWidget* tree_ = nullptr;
  QPushButton* edit_ = nullptr;
  QPushButton* delete_ = nullptr;
  QList<Annotation> listed_;
};

}  // namespace attnscope
