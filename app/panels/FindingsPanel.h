// Findings dock (DESIGN §4, §5): the diagnoses of analyze_case for the selected case at the
// current settings (severity, kind, tensor, location, count, message; the remedy as tooltip).
// Clicking a finding selects its batch / head and shows its location on the matching heatmap.
#pragma once

#include <QWidget>

class QLabel;
class QTreeWidget;
class QTreeWidgetItem;

namespace attnscope {

class AnalysisController;
class SessionContext;

class FindingsPanel : public QWidget {
  Q_OBJECT

 public:
  FindingsPanel(SessionContext* context, AnalysisController* analysis, QWidget* parent = nullptr);

  QTreeWidget* list() const { return list_; }
  int findingCount() const;
  // Row of the first finding of a kind ("score_overflow"), -1 when none.
  int rowOfKind(const QString& kind) const;
  // Acts as a click on row `row`.
  void activate(int row);
  // Marks row `row` as the current finding without focusing it again (F8 did).
  void selectRow(int row);

 private:
  void showSummary();
  void onActivated(QTreeWidgetItem* item);

  SessionContext* context_;
  AnalysisController* analysis_;
  QLabel* header_ = nullptr;
  QTreeWidget* list_ = nullptr;
};

}  // namespace attnscope
