// Opening dumps from the window and applying command-line options (see MainWindow.h): files
// open one after another on the DumpOpener; the blocking variants wait with the event loop
// running, and the settings apply once the last file has opened.
#include "app/gui/MainWindow.h"

#include <QEventLoop>
#include <memory>
#include <optional>

#include "app/gui/DumpOpener.h"
#include "app/gui/FindingNavigator.h"
#include "app/gui/SessionContext.h"
#include "app/gui/StepperController.h"
#include "app/gui/ViewStateController.h"
#include "app/panels/HealthPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/PanelReveal.h"
#include "app/panels/StepperPanel.h"

namespace attnscope {
namespace {

// Runs `start` and the event loop until the callback it was given reports the outcome.
bool waitFor(const std::function<void(std::function<void(bool)>)>& start) {
  QEventLoop loop;
  std::optional<bool> outcome;
  start([&](bool ok) {
    outcome = ok;
    loop.quit();
  });
  if (!outcome) loop.exec();
  return *outcome;
}

}  // namespace

void MainWindow::open(const OpenTarget& target, std::function<void(bool ok)> done) {
  opener_->open(target.file, [this, target, done = std::move(done)](int index) {
    const bool ok = index >= 0 && selectOpened(index, target);
    if (done) done(ok);
  });
}

bool MainWindow::openTarget(const OpenTarget& target) {
  return waitFor([&](std::function<void(bool)> done) { open(target, std::move(done)); });
}

bool MainWindow::selectOpened(int index, const OpenTarget& target) {
  const auto& cases = context_->file(index).reader->cases();
  if (cases.empty()) {
    const auto& file = context_->file(index);
    if (const int64_t blocks = file.reader->health_blocks(); blocks > 0) {
      // Statistics and no case yet (no step went non-finite): the Health page leads.
      health_->showFile(index);
      pages_->setCurrentWidget(healthPage_);
      statusText_->setText(tr("%1: no case yet, attention health statistics in %2 blocks")
                               .arg(file.path)
                               .arg(blocks));
      return false;
    }
    showError(tr("Empty dump"), tr("%1: no cases").arg(file.path),
              tr("a case is a group holding datasets q, k and v"));
    return false;
  }
  QString casePath = target.casePath;
  bool lead = false;  // nothing to restore: lead to the NaN origin once the scan knows it
  if (casePath.isEmpty()) {
    QStringList paths;
    for (const CaseInfo& c : cases) paths << QString::fromStdString(c.path);
    casePath = ViewStateController::lastCase(context_->file(index).path, paths);
    lead = casePath.isEmpty();
    if (lead) casePath = paths.front();
  }
  if (!context_->selectCase(index, casePath)) {
    showError(tr("Unknown case"),
              tr("%1: no case %2 in this dump").arg(target.file, target.casePath),
              tr("the dump browser lists the cases of the file"));
    return false;
  }
  if (lead) findingNavigator_->leadToOrigin(context_->file(index).path, casePath);
  return true;
}

void MainWindow::applyOptionsLater(const AppOptions& options, std::function<void(bool ok)> done) {
  // Shared by the targets' callbacks: the settings apply once the last open has finished.
  struct Pending {
    int left = 0;
    bool ok = true;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = static_cast<int>(options.targets.size());
  auto finishOne = [this, options, pending, done](bool ok) {
    pending->ok = ok && pending->ok;
    if (--pending->left > 0) return;
    applySettings(options);
    if (done) done(pending->ok);
  };
  if (options.targets.isEmpty()) {
    ++pending->left;
    finishOne(true);
  }
  for (const OpenTarget& t : options.targets) open(t, finishOne);
}

bool MainWindow::applyOptions(const AppOptions& options) {
  return waitFor(
      [&](std::function<void(bool)> done) { applyOptionsLater(options, std::move(done)); });
}

void MainWindow::applySettings(const AppOptions& options) {
  if (options.precision) context_->setPrecision(options.precision);
  if (options.mode) context_->setMode(*options.mode);
  if (options.scale) context_->setScale(options.scale);
  if (options.batch >= 0) context_->setBatch(options.batch);
  if (options.head >= 0) context_->setHead(options.head);
  if (options.matrix) context_->showView(*options.matrix);
  if (options.stepper) {
    revealPanel(stepperPanel_);
    if (*options.stepper < 0) {
      stepper_->runToNextNonfinite();
    } else {
      stepper_->seek(*options.stepper);
    }
  }
}

}  // namespace attnscope
