// Leading the user to the problem (DESIGN §6): a dump opened without a case to restore moves,
// once the background scan knows it, to the first case with an error finding (a run folder:
// to the run's first bad case, on whichever rank it is), in a mode the finding shows in, and
// focuses that finding (head, heatmap tab, rows); F8 / Shift+F8 walk to the next / previous
// error or warning finding, through the findings list of the case shown and then on to the
// next / previous case the scan found one in (across the open files).
#pragma once

#include <QObject>
#include <QString>
#include <optional>
#include <vector>

#include "core/analysis/finding.h"

class QAction;

namespace attnscope {

class AnalysisController;
class ScanController;
class SessionContext;
struct CaseVerdict;

class FindingNavigator : public QObject {
  Q_OBJECT

 public:
  FindingNavigator(SessionContext* context, AnalysisController* analysis, ScanController* scans,
                   QObject* parent = nullptr);

  QAction* nextAction() const { return next_; }
  QAction* previousAction() const { return previous_; }

  // `file` was opened on `openedCase` with nothing to restore: move to its first error case
  // once the scan finds it, unless the user selected another case meanwhile. A rank of a run
  // folder moves, once every rank is scanned, to the run's first bad case (first_bad_case:
  // the earliest step and layer where a failure starts, on whichever rank), as
  // `attnscope-cli scan` names it.
  void leadToFirstError(const QString& file, const QString& openedCase);
  bool leading() const { return lead_.has_value(); }

  void next();
  void previous();
  // The finding shown last (index into the current case summary's findings), -1 for none.
  int current() const { return current_; }

 signals:
  // Finding `index` of the current case summary was focused (the findings list selects it).
  void findingShown(int index);
  void notice(const QString& text);

 private:
  struct Lead {
    QString file, openedCase;
  };
  // Which finding to show once the summary of a case moved to arrives.
  enum class Arrival { first, last };

  void onScanChanged(const QString& file);
  void leadInRun(const std::vector<int>& run);  // run: the run's open files, by rank
  void onSummaryChanged();
  void step(int direction);
  bool moveToCase(int direction);
  void goToCase(int fileIndex, const QString& casePath, const CaseVerdict& verdict,
                Arrival arrival);
  void show(int index);

  SessionContext* context_;
  AnalysisController* analysis_;
  ScanController* scans_;
  QAction* next_ = nullptr;
  QAction* previous_ = nullptr;
  std::optional<Lead> lead_;
  std::optional<Arrival> arrival_;  // a case was selected here: show a finding on its summary
  QString arrivalCase_;
  int current_ = -1;
};

}  // namespace attnscope
