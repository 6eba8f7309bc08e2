// Leading the user to the problem (DESIGN §5): a dump opened without a case to restore moves,
// once the background scan knows it, to the origin of the first NaN / Inf in execution order
// (first_nonfinite: steps in order, forward layers ascending, backward layers descending, a run
// folder's ranks together), else to the first error `attnscope-cli scan` names
// (first_bad_case), in a mode the finding shows in, and focuses it (head, the stage's heatmap
// tab, rows); "Go to NaN origin" and "Go to first error" do the same on demand. F8 / Shift+F8
// walk to the next / previous error or warning finding, through the findings list of the case
// shown and then on to the next / previous case the scan found one in (across the open files).
#pragma once

#include <QObject>
#include <QString>
#include <optional>
#include <vector>

#include "core/analysis/finding.h"
#include "core/analysis/nonfinite_origin.h"

class QAction;

namespace attnscope {

class AnalysisController;
class ScanController;
class SessionContext;

class FindingNavigator : public QObject {
  Q_OBJECT

 public:
  FindingNavigator(SessionContext* context, AnalysisController* analysis, ScanController* scans,
                   QObject* parent = nullptr);

  QAction* nextAction() const { return next_; }
  QAction* previousAction() const { return previous_; }
  QAction* originAction() const { return origin_; }
  QAction* firstErrorAction() const { return firstError_; }

  // `file` was opened on `openedCase` with nothing to restore: move to the origin of its first
  // NaN / Inf (else its first error) once the scan knows it, unless the user selected another
  // case meanwhile. A rank of a run folder moves, once every rank is scanned, to the run's
  // origin, on whichever rank it is.
  void leadToOrigin(const QString& file, const QString& openedCase);
  bool leading() const { return lead_.has_value(); }
  // "Go to NaN origin" / "Go to first error" over the current file's run (or file); a notice
  // says when the scan has not got that far yet or found none.
  void goToOrigin();
  void goToFirstError();
  // Moves to case `casePath` of open file `fileIndex` and shows `site` there (the Origin list).
  void goToSite(int fileIndex, const QString& casePath, const NonfiniteSite& site);

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
  // Which finding to show once the summary of a case moved to arrives: the first or last
  // walked one, or the one matching a non-finite site.
  enum class Arrival { first, last, site };
  // Where to go in the open files: the case, the kernel modes its finding to show was seen in
  // (empty: any), and for a NaN origin its site.
  struct Target {
    int file = -1;
    QString casePath;
    std::vector<std::string> modes;
    std::optional<NonfiniteSite> site;
  };
  enum class Goal { origin, firstError };
  // The goal's target over the run of `fileIndex` once its scans settle it; nullopt while
  // they may still change it, or when there is none (`settled` then says which).
  std::optional<Target> find(Goal goal, int fileIndex, bool* settled) const;
  void goTo(Goal goal);

  void onScanChanged(const QString& file);
  void onSummaryChanged();
  void step(int direction);
  bool moveToCase(int direction);
  void goToCase(const Target& target, Arrival arrival);
  // Switches the kernel mode when the shown one is not among `modes` (empty: any).
  void showInMode(const std::vector<std::string>& modes);
  void show(int index);
  void showSite(const NonfiniteSite& site);

  SessionContext* context_;
  AnalysisController* analysis_;
  ScanController* scans_;
  QAction* next_ = nullptr;
  QAction* previous_ = nullptr;
  QAction* origin_ = nullptr;
  QAction* firstError_ = nullptr;
  std::optional<Lead> lead_;
  std::optional<Arrival> arrival_;  // a case was selected here: show a finding on its summary
  std::optional<NonfiniteSite> arrivalSite_;  // Arrival::site: the site to show
  QString arrivalCase_;
  int current_ = -1;
};

}  // namespace attnscope
