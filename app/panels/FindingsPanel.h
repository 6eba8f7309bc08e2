// Findings dock (DESIGN §4, §5): the diagnoses of analyze_case for the selected case at the
// current settings (severity, kind, tensor, location, count, message; the remedy as tooltip).
// Clicking a finding selects its batch / head and shows its location on the matching heatmap;
// "Make reproducer…" (button or context menu) opens the ReproDialog for the selected finding.
#pragma once

#include <QWidget>

class QLabel;
class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;

namespace attnscope {

class AnalysisController;
class ReproDialog;
struct Finding;
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
  QPushButton* reproButton() const { return repro_; }
  // Opens the reproducer dialog for the current finding, the first when none is current (what
  // the button does); null when it cannot have one (a what-if's, or one about the inputs).
  ReproDialog* makeReproducer();

 private:
  void showSummary();
  void onActivated(QTreeWidgetItem* item);
  // The finding of the current row, else of the first; null when the list is empty.
  const Finding* currentFinding() const;
  // Enables the button for the current row; the tooltip says why not otherwise.
  void updateReproButton();

  SessionContext* context_;
  AnalysisController* analysis_;
  QLabel* header_ = nullptr;
  QTreeWidget* list_ = nullptr;
  QPushButton* repro_ = nullptr;
};

}  // namespace attnscope
