// Lead to the first error and walk the findings (see FindingNavigator.h).
#include "app/gui/FindingNavigator.h"

#include <QAction>
#include <QKeySequence>
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "app/gui/AnalysisController.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "core/kernel_registry.h"

namespace attnscope {
namespace {

// F8 walks errors and warnings; info findings are notes, not problems.
bool walked(const Finding& f) {
  return f.severity != Severity::info;
}

}  // namespace

FindingNavigator::FindingNavigator(SessionContext* context, AnalysisController* analysis,
                                   ScanController* scans, QObject* parent)
    : QObject(parent), context_(context), analysis_(analysis), scans_(scans) {
  next_ = new QAction(tr("Next &finding"), this);
  next_->setObjectName(QStringLiteral("nextFindingAction"));
  next_->setShortcut(QKeySequence(Qt::Key_F8));
  next_->setShortcutContext(Qt::ApplicationShortcut);
  previous_ = new QAction(tr("Previous f&inding"), this);
  previous_->setObjectName(QStringLiteral("previousFindingAction"));
  previous_->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F8));
  previous_->setShortcutContext(Qt::ApplicationShortcut);
  connect(next_, &QAction::triggered, this, &FindingNavigator::next);
  connect(previous_, &QAction::triggered, this, &FindingNavigator::previous);
  connect(scans_, &ScanController::scanChanged, this, &FindingNavigator::onScanChanged);
  connect(analysis_, &AnalysisController::summaryChanged, this,
          &FindingNavigator::onSummaryChanged);
  connect(context_, &SessionContext::caseChanged, this, [this] {
    current_ = -1;
    if (context_->casePath() != arrivalCase_) arrival_.reset();
  });
}

void FindingNavigator::leadToFirstError(const QString& file, const QString& openedCase) {
  lead_ = Lead{file, openedCase};
  onScanChanged(file);
}

void FindingNavigator::next() {
  step(+1);
}

void FindingNavigator::previous() {
  step(-1);
}

void FindingNavigator::onScanChanged(const QString& file) {
  if (!lead_) return;
  const int fileIndex = context_->indexOfFile(lead_->file);
  if (fileIndex < 0 || context_->fileIndex() != fileIndex ||
      context_->casePath() != lead_->openedCase) {
    lead_.reset();  // the user went elsewhere first
    return;
  }
  const std::vector<int> run = context_->runFiles(fileIndex);
  if (run.size() > 1) {
    leadInRun(run);
    return;
  }
  if (lead_->file != file) return;
  const std::shared_ptr<const DumpScan> scan = scans_->scan(file);
  if (!scan) return;
  const std::optional<size_t> first = scan->firstError();
  if (!first) {
    if (scan->complete()) lead_.reset();  // no error anywhere: stay on the first case
    return;
  }
  lead_.reset();
  const ScannedCase& c = scan->cases[*first];
  goToCase(fileIndex, QString::fromStdString(c.path), c.verdict, Arrival::first);
}

void FindingNavigator::leadInRun(const std::vector<int>& run) {
  std::vector<CaseOutcome> outcomes;
  std::vector<std::pair<int, const ScannedCase*>> where;  // per outcome: file, case
  std::vector<std::shared_ptr<const DumpScan>> scans;     // keeps `where` alive
  for (int index : run) {
    scans.push_back(scans_->scan(context_->file(index).path));
    if (!scans.back() || !scans.back()->complete()) return;  // every rank first
    for (const ScannedCase& c : scans.back()->cases) {
      if (c.state != ScanState::done) continue;
      outcomes.push_back(c.verdict.outcome);
      where.emplace_back(index, &c);
    }
  }
  lead_.reset();
  const std::optional<FirstBadCase> first = first_bad_case(outcomes);
  if (!first) return;  // no error on any rank: stay on the first case
  const auto [fileIndex, c] = where[first->index];
  goToCase(fileIndex, QString::fromStdString(c->path), c->verdict, Arrival::first);
}

void FindingNavigator::goToCase(int fileIndex, const QString& casePath, const CaseVerdict& verdict,
                                Arrival arrival) {
  arrival_ = arrival;
  arrivalCase_ = casePath;
  if (context_->fileIndex() != fileIndex || context_->casePath() != casePath) {
    context_->selectCase(fileIndex, casePath);
  }
  // A finding seen in one kernel mode only (the scan runs both when the dump does not say
  // which ran) is shown in that mode.
  if (verdict.lead && !verdict.lead->modes.empty()) {
    const std::vector<std::string>& modes = verdict.lead->modes;
    const std::string shown = mode_name(context_->effectiveMode());
    if (std::find(modes.begin(), modes.end(), shown) == modes.end()) {
      if (modes.front() == mode_name(Mode::unfused)) context_->setMode(Mode::unfused);
      if (modes.front() == mode_name(Mode::fused)) context_->setMode(Mode::fused);
    }
  }
  onSummaryChanged();
}

void FindingNavigator::onSummaryChanged() {
  if (!arrival_ || context_->casePath() != arrivalCase_) return;
  const auto s = analysis_->summary();
  if (!s || s->case_path != arrivalCase_.toStdString() || analysis_->summaryRunner()->busy()) {
    return;  // wait for this case's summary at the settings now in effect
  }
  const Arrival arrival = *arrival_;
  arrival_.reset();
  const int n = static_cast<int>(s->findings.size());
  for (int k = 0; k < n; ++k) {
    const int i = arrival == Arrival::first ? k : n - 1 - k;
    if (walked(s->findings[static_cast<size_t>(i)])) {
      show(i);
      return;
    }
  }
}

void FindingNavigator::step(int direction) {
  const auto s = analysis_->summary();
  if (s && s->case_path == context_->casePath().toStdString()) {
    const int n = static_cast<int>(s->findings.size());
    for (int i = current_ + direction; i >= 0 && i < n; i += direction) {
      if (walked(s->findings[static_cast<size_t>(i)])) {
        show(i);
        return;
      }
    }
  }
  if (!moveToCase(direction)) {
    emit notice(direction > 0 ? tr("no further finding after this case")
                              : tr("no earlier finding before this case"));
  }
}

bool FindingNavigator::moveToCase(int direction) {
  // The cases of the open files in scan order, from the one after (before) the current case.
  const int current = context_->fileIndex();
  if (current < 0) return false;
  const std::string here = context_->casePath().toStdString();
  for (int file = current; file >= 0 && file < context_->fileCount(); file += direction) {
    const std::shared_ptr<const DumpScan> scan = scans_->scan(context_->file(file).path);
    if (!scan) continue;
    const int n = static_cast<int>(scan->cases.size());
    int i = direction > 0 ? 0 : n - 1;
    for (int k = 0; file == current && k < n; ++k) {
      if (scan->cases[static_cast<size_t>(k)].path == here) i = k + direction;
    }
    for (; i >= 0 && i < n; i += direction) {
      const ScannedCase& c = scan->cases[static_cast<size_t>(i)];
      if (c.state == ScanState::done && c.verdict.worst && *c.verdict.worst != Severity::info) {
        goToCase(file, QString::fromStdString(c.path), c.verdict,
                 direction > 0 ? Arrival::first : Arrival::last);
        return true;
      }
    }
  }
  return false;
}

void FindingNavigator::show(int index) {
  const auto s = analysis_->summary();
  if (!s || index < 0 || index >= static_cast<int>(s->findings.size())) return;
  current_ = index;
  context_->focus(findingFocus(s->findings[static_cast<size_t>(index)]));
  emit findingShown(index);
}

}  // namespace attnscope
