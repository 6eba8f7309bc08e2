// Background scan of every case of each opened dump, as `attnscope-cli scan` runs it
// (core/view/case_verdict.h): the dump browser's status badges, the case a newly opened dump
// leads to and the cases "next finding" walks through. One file at a time, in the order opened,
// on its own TaskRunner at normal priority with one kernel thread (the head recompute keeps the
// other cores); verdicts fill in as cases finish, shown at most every 250 ms. cancel() stops
// the scan (the status bar's Cancel), rescan() resumes the files not scanned to the end.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QStringList>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/view/case_verdict.h"

namespace attnscope {

class SessionContext;
class TaskRunner;

enum class ScanState : uint8_t { pending, done, error };

struct ScannedCase {
  std::string path;
  ScanState state = ScanState::pending;
  CaseVerdict verdict;  // done
  std::string error;    // error: why the case could not be scanned
};

// The scan of one dump: its cases in the reader's order.
struct DumpScan {
  std::vector<ScannedCase> cases;
  int done = 0;  // cases no longer pending

  bool complete() const { return done == static_cast<int>(cases.size()); }
  // The first case with an error finding once every case before it is scanned; nullopt while
  // that is not known yet, or when no case has one.
  std::optional<size_t> firstError() const;
  const ScannedCase* find(const std::string& path) const;
};

// The verdicts of several open files' scans (a run's ranks), as first_bad_case and
// first_nonfinite take them: the cases scanned so far in each file's prefix (the scan runs in
// case order), ranks one after the other.
struct ScannedOutcomes {
  std::vector<CaseOutcome> outcomes;
  std::vector<std::pair<int, const ScannedCase*>> where;  // per outcome: file index, case
  std::vector<std::shared_ptr<const DumpScan>> scans;     // keeps `where` alive
  bool complete = true;                                   // every file scanned to the end
  std::optional<int64_t> last_step;                       // the step of the last case scanned
};

class ScanController : public QObject {
  Q_OBJECT

 public:
  explicit ScanController(SessionContext* context, QObject* parent = nullptr);

  // The scan of an open dump (partial while it runs); nullptr before it starts.
  std::shared_ptr<const DumpScan> scan(const QString& file) const;
  TaskRunner* runner() const { return runner_; }
  bool busy() const;
  // The outcomes of the open files `files` (indices into the context's files).
  ScannedOutcomes outcomes(const std::vector<int>& files) const;

  void cancel();
  void rescan();
  // New cases of an open dump (SessionContext::casesAdded): scanned after those before them.
  void addCases(const QString& file, const QStringList& paths);

 signals:
  // More verdicts of `file` are known (or its scan started, was cancelled or finished).
  void scanChanged(const QString& file);

 private:
  void startNext();
  void showProgress();

  struct Progress;
  SessionContext* context_;
  TaskRunner* runner_ = nullptr;
  std::map<QString, std::shared_ptr<const DumpScan>> scans_;
  QString running_;                     // the file being scanned; empty when idle
  std::shared_ptr<Progress> progress_;  // its partial scan (shared with the job)
  QElapsedTimer partialShown_;
};

}  // namespace attnscope
