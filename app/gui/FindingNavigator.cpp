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
  origin_ = new QAction(tr("Go to NaN &origin"), this);
  origin_->setObjectName(QStringLiteral("goToOriginAction"));
  origin_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_F8));
  origin_->setShortcutContext(Qt::ApplicationShortcut);
  origin_->setToolTip(
      tr("Where the first NaN / Inf appeared, in execution order: steps in "
         "order, forward layers ascending, then backward layers descending"));
  firstError_ = new QAction(tr("Go to first &error"), this);
  firstError_->setObjectName(QStringLiteral("goToFirstErrorAction"));
  firstError_->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_F8));
  firstError_->setShortcutContext(Qt::ApplicationShortcut);
  firstError_->setToolTip(tr("The first bad case as attnscope-cli scan names it"));
  connect(next_, &QAction::triggered, this, &FindingNavigator::next);
  connect(previous_, &QAction::triggered, this, &FindingNavigator::previous);
  connect(origin_, &QAction::triggered, this, &FindingNavigator::goToOrigin);
  connect(firstError_, &QAction::triggered, this, &FindingNavigator::goToFirstError);
  connect(scans_, &ScanController::scanChanged, this, &FindingNavigator::onScanChanged);
  connect(analysis_, &AnalysisController::summaryChanged, this,
          &FindingNavigator::onSummaryChanged);
  connect(context_, &SessionContext::caseChanged, this, [this] {
    current_ = -1;
    if (context_->casePath() != arrivalCase_) arrival_.reset();
  });
}

void FindingNavigator::leadToOrigin(const QString& file, const QString& openedCase) {
  lead_ = Lead{file, openedCase};
  onScanChanged(file);
}

void FindingNavigator::next() {
  step(+1);
}

void FindingNavigator::previous() {
  step(-1);
}

void FindingNavigator::goToOrigin() {
  goTo(Goal::origin);
}

void FindingNavigator::goToFirstError() {
  goTo(Goal::firstError);
}

std::optional<FindingNavigator::Target> FindingNavigator::find(Goal goal, int fileIndex,
                                                               bool* settled) const {
  *settled = false;
  const std::vector<int> run = context_->runFiles(fileIndex);
  const ScannedOutcomes scanned = scans_->outcomes(run);
  const std::vector<CaseOutcome>& outcomes = scanned.outcomes;
  const auto& where = scanned.where;
  const bool complete = scanned.complete;
  const std::optional<int64_t>& last_step = scanned.last_step;
  const auto target = [&](size_t n, std::optional<NonfiniteSite> site) {
    const CaseVerdict& v = where[n].second->verdict;
    std::vector<std::string> modes = site     ? site->modes
                                     : v.lead ? v.lead->modes
                                              : std::vector<std::string>{};
    return Target{where[n].first, QString::fromStdString(where[n].second->path), std::move(modes),
                  std::move(site)};
  };
  if (goal == Goal::origin) {
    const std::optional<FirstNonfinite> first = first_nonfinite(outcomes);
    // Cases come in step order: once a later step is scanned, no earlier NaN can turn up.
    const std::optional<int64_t> step = first ? outcomes[first->index].step : std::nullopt;
    if (first && (complete || (run.size() == 1 && step && last_step && *last_step > *step))) {
      *settled = true;
      return target(first->index, first->site);
    }
    if (first || !complete) return std::nullopt;
  }
  if (!complete) return std::nullopt;
  *settled = true;
  const std::optional<FirstBadCase> bad = first_bad_case(outcomes);
  if (!bad) return std::nullopt;
  return target(bad->index, std::nullopt);
}

void FindingNavigator::goToSite(int fileIndex, const QString& casePath, const NonfiniteSite& site) {
  goToCase(Target{fileIndex, casePath, site.modes, site}, Arrival::site);
}

void FindingNavigator::goTo(Goal goal) {
  const int fileIndex = context_->fileIndex();
  if (fileIndex < 0) return;
  bool settled = false;
  const std::optional<Target> t = find(goal, fileIndex, &settled);
  if (t) {
    goToCase(*t, t->site ? Arrival::site : Arrival::first);
    return;
  }
  emit notice(!settled ? tr("the background scan has not got that far yet; try again when it "
                            "ends")
              : goal == Goal::origin ? tr("no NaN / Inf in the scanned cases")
                                     : tr("no error in the scanned cases"));
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
  const bool ours =
      std::any_of(run.begin(), run.end(), [&](int i) { return context_->file(i).path == file; });
  if (!ours) return;
  bool settled = false;
  const std::optional<Target> t = find(Goal::origin, fileIndex, &settled);
  if (!settled) return;
  lead_.reset();
  if (t) goToCase(*t, t->site ? Arrival::site : Arrival::first);  // else: nothing wrong anywhere
}

void FindingNavigator::goToCase(const Target& target, Arrival arrival) {
  arrival_ = arrival;
  arrivalSite_ = target.site;
  arrivalCase_ = target.casePath;
  if (context_->fileIndex() != target.file || context_->casePath() != target.casePath) {
    context_->selectCase(target.file, target.casePath);
  }
  showInMode(target.modes);
  onSummaryChanged();
}

void FindingNavigator::showInMode(const std::vector<std::string>& modes) {
  // A finding seen in one kernel mode only (the scan runs both when the dump does not say
  // which ran) is shown in that mode.
  if (modes.empty()) return;
  const std::string shown = mode_name(context_->effectiveMode());
  if (std::find(modes.begin(), modes.end(), shown) != modes.end()) return;
  if (modes.front() == mode_name(Mode::unfused)) context_->setMode(Mode::unfused);
  if (modes.front() == mode_name(Mode::fused)) context_->setMode(Mode::fused);
}

void FindingNavigator::onSummaryChanged() {
  if (!arrival_ || context_->casePath() != arrivalCase_) return;
  const auto s = analysis_->summary();
  if (!s || s->case_path != arrivalCase_.toStdString() || analysis_->summaryRunner()->busy()) {
    return;  // wait for this case's summary at the settings now in effect
  }
  const Arrival arrival = *arrival_;
  arrival_.reset();
  if (arrival == Arrival::site && arrivalSite_) {
    showSite(*arrivalSite_);
    return;
  }
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
        goToCase(Target{file, QString::fromStdString(c.path),
                        c.verdict.lead ? c.verdict.lead->modes : std::vector<std::string>{},
                        std::nullopt},
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

void FindingNavigator::showSite(const NonfiniteSite& site) {
  // The summary's finding of the site (its list row), and the site's own view: a fully masked
  // row is reported on O but appears first in P.
  const auto s = analysis_->summary();
  current_ = -1;
  for (size_t i = 0; s && i < s->findings.size(); ++i) {
    const Finding& f = s->findings[i];
    if (finding_kind_name(f.kind) == site.kind && f.severity == Severity::error &&
        std::max<int64_t>(f.batch, 0) == site.batch &&
        (f.head == site.head || (f.head < 0 && f.heads.first == site.head))) {
      current_ = static_cast<int>(i);
      break;
    }
  }
  FocusTarget t;
  t.tensor = QString::fromStdString(site.view);
  t.batch = site.batch;
  t.head = site.head;
  t.pinFirstNonfinite = true;
  if (site.rows.valid())
    t.window.row_begin = site.rows.first, t.window.row_end = site.rows.last + 1;
  if (site.cols.valid())
    t.window.col_begin = site.cols.first, t.window.col_end = site.cols.last + 1;
  context_->focus(t);
  if (current_ >= 0) emit findingShown(current_);
}

}  // namespace attnscope
