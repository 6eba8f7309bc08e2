// Main window: docks, menus, status bar and the wiring between the SessionContext and the
// background ComputeWorker (see MainWindow.h).
#include "app/gui/MainWindow.h"

#include <QAction>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QEventLoop>
#include <QFileDialog>
#include <QFileInfo>
#include <QGuiApplication>
#include <QIcon>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QRegularExpression>
#include <QScreen>
#include <QScrollArea>
#include <QSettings>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTabWidget>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>
#include <vector>

#include "app/export/CaseExport.h"
#include "app/export/SettingNames.h"
#include "app/gui/AnalysisController.h"
#include "app/gui/AnnotationController.h"
#include "app/gui/CompareController.h"
#include "app/gui/ComputeWorker.h"
#include "app/gui/DumpOpener.h"
#include "app/gui/DumpWatcher.h"
#include "app/gui/FindingNavigator.h"
#include "app/gui/HeadComputeController.h"
#include "app/gui/HelpMenu.h"
#include "app/gui/NavigationController.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/StepperController.h"
#include "app/gui/TaskRunner.h"
#include "app/gui/ViewStateController.h"
#include "app/gui/WheelGuard.h"
#include "app/gui/WindowShortcuts.h"
#include "app/panels/AnnotationListPanel.h"
#include "app/panels/ComparePanel.h"
#include "app/panels/ControlsPanel.h"
#include "app/panels/DumpBrowserPanel.h"
#include "app/panels/FindingsPanel.h"
#include "app/panels/HealthPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/InspectorPanel.h"
#include "app/panels/OriginPanel.h"
#include "app/panels/OverviewPanel.h"
#include "app/panels/PanelReveal.h"
#include "app/panels/RowPlotPanel.h"
#include "app/panels/StepperPanel.h"
#include "app/panels/SweepPanel.h"
#include "app/panels/WhatIfBanner.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/PlotExport.h"

namespace attnscope {
namespace {

const char* const kGeometryKey = "mainWindow/geometry";
const char* const kStateKey = "mainWindow/state";
const char* const kExportFolderKey = "export/lastFolder";
constexpr int kStateVersion = 2;  // 2: secondary views are pages, no bottom docks
constexpr int kStepperMessageMs = 10000;
constexpr int kMinDockSide = 80;  // px: a docked panel narrower or lower is a sliver
constexpr QSize kPreferredSize(1500, 950);

// The preferred size, within the available area of the primary screen (a 1366×768 laptop gets
// a window that fits it, title bar and task bar included).
QSize defaultWindowSize() {
  const QScreen* screen = QGuiApplication::primaryScreen();
  if (!screen) return kPreferredSize;
  const QSize available = screen->availableGeometry().size();
  return kPreferredSize.boundedTo(QSize(available.width(), available.height() - 40));
}

// While it lives, the heatmaps under `root` draw no stepper tile outline: it marks the step the
// screen shows, not the figure's content, so exports leave it out. Restored on destruction.
class TileOutlinesHidden {
 public:
  explicit TileOutlinesHidden(QWidget* root) {
    for (HeatmapView* v : root->findChildren<HeatmapView*>()) {
      if (!v->highlight()) continue;
      hidden_.push_back({v, *v->highlight()});
      v->setHighlight(std::nullopt);
    }
  }
  ~TileOutlinesHidden() {
    for (const auto& [view, block] : hidden_) view->setHighlight(block);
  }
  TileOutlinesHidden(const TileOutlinesHidden&) = delete;
  TileOutlinesHidden& operator=(const TileOutlinesHidden&) = delete;

 private:
  std::vector<std::pair<HeatmapView*, MatrixWindow>> hidden_;
};

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(tr("attnscope"));
  setObjectName(QStringLiteral("attnscopeMainWindow"));
  if (QFile::exists(QStringLiteral(":/icons/attnscope.svg"))) {  // compiled into attnscope only
    setWindowIcon(QIcon(QStringLiteral(":/icons/attnscope.svg")));
  }
  context_ = new SessionContext(this);
  opener_ = new DumpOpener(context_, this);
  headCompute_ = new HeadComputeController(context_, this);
  worker_ = headCompute_->worker();
  heatmaps_ = new HeatmapPanel(context_, this);
  compare_ = new CompareController(context_, this);
  comparePanel_ = new ComparePanel(context_, compare_, this);
  central_ = new QStackedWidget(this);
  central_->addWidget(heatmaps_);
  // Scrolled when the window is smaller than the two runs side by side need.
  auto* compareScroll = new QScrollArea(central_);
  compareScroll->setFrameShape(QFrame::NoFrame);
  compareScroll->setWidgetResizable(true);
  compareScroll->setWidget(comparePanel_);
  central_->addWidget(compareScroll);
  // Pages: the heatmaps first, the secondary views full-size beside them (never slivers in
  // a dock on a laptop screen).
  pages_ = new QTabWidget(this);
  pages_->setObjectName(QStringLiteral("pages"));
  pages_->setDocumentMode(true);
  pages_->addTab(central_, tr("Heatmaps"));
  auto* central = new QWidget(this);
  auto* centralLayout = new QVBoxLayout(central);
  centralLayout->setContentsMargins(0, 0, 0, 0);
  centralLayout->setSpacing(2);
  centralLayout->addWidget(pages_, 1);
  setCentralWidget(central);

  scans_ = new ScanController(context_, this);
  follower_ = new DumpWatcher(context_, this);
  browser_ = new DumpBrowserPanel(context_, scans_, this);
  analysis_ = new AnalysisController(context_, this);
  whatIfBanner_ = new WhatIfBanner(context_, analysis_, this);
  centralLayout->insertWidget(0, whatIfBanner_);
  controls_ = new ControlsPanel(context_, analysis_, this);
  centralLayout->insertWidget(1, controls_->notes());
  inspector_ = new InspectorPanel(context_, this);
  rowPlots_ = new RowPlotPanel(context_, this);
  addPanelDock(browser_, tr("Dump browser"), QStringLiteral("dumpBrowserDock"),
               Qt::LeftDockWidgetArea);
  addPanelDock(controls_, tr("Controls"), QStringLiteral("controlsDock"), Qt::LeftDockWidgetArea);
  addPanelDock(inspector_, tr("Inspector"), QStringLiteral("inspectorDock"),
               Qt::RightDockWidgetArea);
  buildAnalysisDocks();
  annotations_ = new AnnotationController(context_, this);
  addToolBar(Qt::TopToolBarArea, annotations_->toolBar());
  navigation_ = new NavigationController(context_, this);
  findingNavigator_ = new FindingNavigator(context_, analysis_, scans_, this);
  navigation_->menu()->addSeparator();
  navigation_->menu()->addAction(findingNavigator_->nextAction());
  navigation_->menu()->addAction(findingNavigator_->previousAction());
  navigation_->menu()->addAction(findingNavigator_->originAction());
  navigation_->menu()->addAction(findingNavigator_->firstErrorAction());
  originPanel_ = new OriginPanel(context_, scans_, findingNavigator_, this);
  buildPages();
  viewState_ = new ViewStateController(context_, annotations_, this);
  annotationList_ = new AnnotationListPanel(context_, this);
  tabifyDockWidget(findChild<QDockWidget*>(QStringLiteral("findingsDock")),
                   addPanelDock(annotationList_, tr("Annotations"),
                                QStringLiteral("annotationListDock"), Qt::RightDockWidgetArea));
  findChild<QDockWidget*>(QStringLiteral("findingsDock"))->raise();
  buildMenus();
  buildStatusBar();
  letWindowShortcutsThrough(this);
  guardWheel(this);

  resize(defaultWindowSize());
  sizeDocksToWindow();
  defaultState_ = saveState(kStateVersion);
  const QSettings settings;
  restoreGeometry(settings.value(kGeometryKey).toByteArray());
  restoreState(settings.value(kStateKey).toByteArray(), kStateVersion);

  errorHandler_ = [this](const QString& title, const QString& message, const QString& hint) {
    auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, this);
    box->setObjectName(QStringLiteral("attnscopeError"));
    box->setInformativeText(hint.isEmpty() ? QString() : tr("Hint: %1").arg(hint));
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();
  };

  connect(context_, &SessionContext::errorRaised, this, &MainWindow::showError);
  // Going to a cell, a finding, an origin site or a stepper stage shows it on the heatmaps.
  connect(context_, &SessionContext::regionRequested, this, [this](const RegionRequest& r) {
    if (r.reveal) revealPanel(heatmaps_);
  });
  // The stepper's stand in the status bar (a message over the progress texts for a while)
  // while its page is not in front.
  connect(stepper_, &StepperController::snapshotChanged, this, [this] {
    if (pages_->currentWidget()->isAncestorOf(stepperPanel_)) return;
    if (!stepper_->snapshot() && stepper_->eagerText().isEmpty()) return;  // not stepping
    const QStringList lines = stepperPanel_->summary().split(QLatin1Char('\n'));
    if (lines.front().isEmpty()) return;
    statusBar()->showMessage(tr("stepper: %1").arg(lines.mid(0, 2).join(QStringLiteral(" · "))),
                             kStepperMessageMs);
  });
  // The title names what is shown: "/train/step_005/layer_00 — seed_cases.h5 — attnscope".
  const auto title = [this] {
    const int file = context_->fileIndex();
    setWindowTitle(
        file < 0 || context_->casePath().isEmpty()
            ? tr("attnscope")
            : tr("%1 — %2 — attnscope")
                  .arg(context_->casePath(), QFileInfo(context_->file(file).path).fileName()));
  };
  connect(context_, &SessionContext::caseChanged, this, title);
  connect(context_, &SessionContext::filesChanged, this, title);
  connect(opener_, &DumpOpener::failed, this, &MainWindow::showError);
  connect(browser_, &DumpBrowserPanel::openRequested, this, [this](const QStringList& paths) {
    for (const QString& path : paths) open({path, {}});
  });
  connect(annotations_, &AnnotationController::notice, statusText_, &QLabel::setText);
  connect(navigation_, &NavigationController::notice, statusText_, &QLabel::setText);
  connect(findingNavigator_, &FindingNavigator::notice, statusText_, &QLabel::setText);
  connect(findingNavigator_, &FindingNavigator::findingShown, findings_, &FindingsPanel::selectRow);
  connect(headCompute_, &HeadComputeController::computed, statusText_, &QLabel::setText);
  connect(worker_, &ComputeWorker::failed, this,
          [this](quint64, const QString& message, const QString& hint) {
            statusText_->setText(tr("recompute failed"));
            showError(tr("Recompute failed"), message, hint);
          });
}

MainWindow::~MainWindow() = default;

QDockWidget* MainWindow::addPanelDock(QWidget* panel, const QString& title,
                                      const QString& objectName, Qt::DockWidgetArea area) {
  auto* dock = new QDockWidget(title, this);
  dock->setObjectName(objectName);
  dock->setWidget(scrolled(panel));
  addDockWidget(area, dock);
  docks_ << dock;
  return dock;
}

void MainWindow::buildPages() {
  // In the order of the workflow: where it broke, across the run, along the rows, step by step,
  // which scale would help; then the run's health before it broke.
  addPage(originPanel_, tr("Origin"));
  addPage(overview_, tr("Overview"));
  addPage(rowPlots_, tr("Row plots"));
  addPage(stepperPanel_, tr("Stepper"));
  QWidget* sweepPage = addPage(sweep_, tr("Scale sweep"));
  healthPage_ = addPage(health_, tr("Health"));  // across the run's steps, before the NaN
  // The sweep runs only while its page is shown.
  connect(pages_, &QTabWidget::currentChanged, this, [this, sweepPage](int index) {
    analysis_->setSweepEnabled(pages_->widget(index) == sweepPage);
  });
}

QWidget* MainWindow::addPage(QWidget* panel, const QString& title) {
  QWidget* page = scrolled(panel);
  pages_->addTab(page, title);
  return page;
}

QWidget* MainWindow::scrolled(QWidget* panel) {
  // The panel scrolls when its dock or page is smaller than the panel's minimum, so no panel
  // sets the window's minimum size or grows the window when its content grows.
  auto* scroll = new QScrollArea(this);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidgetResizable(true);
  scroll->setWidget(panel);
  return scroll;
}

void MainWindow::sizeDocksToWindow() {
  // Narrow side columns (browser over controls, inspector over findings): the pages in the
  // centre get at least half the window at 1366×768. The controls get the room they ask for.
  const QSize controls = controls_->minimumSizeHint() + QSize(8, 28);  // frame, dock title
  const int left = std::clamp(controls.width(), width() * 15 / 100, width() / 4);
  const int right = std::clamp(width() * 18 / 100, 240, 340);
  resizeDocks({docks_[0], docks_[2]}, {left, right}, Qt::Horizontal);
  resizeDocks({docks_[1]}, {std::min(controls.height(), height() / 2)}, Qt::Vertical);
  resizeDocks({docks_[2]}, {height() * 2 / 5}, Qt::Vertical);
}

QList<QDockWidget*> MainWindow::docks() const {
  return docks_;
}

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  QAction* open = file->addAction(tr("&Open…"), browser_, &DumpBrowserPanel::openWithDialog);
  open->setShortcut(QKeySequence::Open);
  QAction* openFolder =
      file->addAction(tr("Open &Folder…"), browser_, &DumpBrowserPanel::openFolderWithDialog);
  openFolder->setObjectName(QStringLiteral("openFolderAction"));
  openFolder->setToolTip(tr("Open every dump of a run folder (one per rank) as one run"));
  openFolder->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_O));
  file->addMenu(browser_->recentMenu());
  QAction* exportAction = file->addAction(tr("&Export view…"), this, &MainWindow::exportWithDialog);
  exportAction->setObjectName(QStringLiteral("exportAction"));
  exportAction->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_E));
  file->addAction(tr("Export &all views of this case…"), this, &MainWindow::exportAllWithDialog)
      ->setObjectName(QStringLiteral("exportAllAction"));
  file->addSeparator();
  QAction* quit = file->addAction(tr("&Quit"), this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* view = menuBar()->addMenu(tr("&View"));
  view->setObjectName(QStringLiteral("viewMenu"));
  compareAction_ = view->addAction(tr("&Compare two runs"));
  compareAction_->setObjectName(QStringLiteral("compareAction"));
  compareAction_->setCheckable(true);
  compareAction_->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_K));
  compareAction_->setToolTip(
      tr("A view of the head in two runs side by side (another mode, precision, backend or the "
         "recorded outputs), zoomed together, and their difference"));
  connect(compareAction_, &QAction::toggled, this,
          [this](bool on) { central_->setCurrentIndex(on ? 1 : 0); });
  connect(comparePanel_, &ComparePanel::closeRequested, compareAction_,
          [this] { compareAction_->setChecked(false); });

  menuBar()->addMenu(annotations_->menu());
  menuBar()->addMenu(navigation_->menu());

  buildDebugMenu();
  QMenu* window = menuBar()->addMenu(tr("&Window"));
  window->setObjectName(QStringLiteral("windowMenu"));
  for (QDockWidget* dock : docks_) window->addAction(dock->toggleViewAction());
  window->addSeparator();
  for (int i = 0; i < pages_->count(); ++i) {  // Ctrl+1 heatmaps, Ctrl+2 row plots, …
    QAction* page = window->addAction(tr("Page: %1").arg(pages_->tabText(i)), this,
                                      [this, i] { pages_->setCurrentIndex(i); });
    page->setShortcut(QKeySequence(Qt::CTRL | static_cast<Qt::Key>(Qt::Key_1 + i)));
  }
  window->addSeparator();
  window->addAction(tr("&Reset layout"), this, &MainWindow::resetLayout);
  help_ = new HelpMenu(this);
  menuBar()->addMenu(help_->menu());
}

void MainWindow::buildAnalysisDocks() {
  stepper_ = new StepperController(context_, this);
  stepperPanel_ = new StepperPanel(context_, stepper_, this);
  findings_ = new FindingsPanel(context_, analysis_, this);
  overview_ = new OverviewPanel(context_, analysis_, this);
  health_ = new HealthPanel(context_, this);
  sweep_ = new SweepPanel(context_, analysis_, this);
  QDockWidget* findings = addPanelDock(findings_, tr("Findings"), QStringLiteral("findingsDock"),
                                       Qt::RightDockWidgetArea);
  findings->raise();
  auto failed = [this](const QString& what, const QString& message) {
    statusText_->setText(tr("%1 failed: %2").arg(what, message));
  };
  connect(analysis_, &AnalysisController::failed, this, failed);
  connect(stepper_, &StepperController::failed, this,
          [this](const QString& m) { showError(tr("Stepper"), m, tr("see the stepper panel")); });
  connect(analysis_->seriesRunner(), &TaskRunner::progress, this, [this](int done, int total) {
    statusText_->setText(tr("step x layer overview: %1 / %2 cases").arg(done).arg(total));
  });
  connect(scans_->runner(), &TaskRunner::progress, this, [this](int done, int total) {
    statusText_->setText(tr("scanning cases: %1 / %2").arg(done).arg(total));
  });
  // When the work ends, the status bar says so (a progress count never stays as if running).
  connect(analysis_->seriesRunner(), &TaskRunner::busyChanged, this, [this](bool busy) {
    if (busy) return;
    // The scan's outcome stays the first thing the status bar says once both are done.
    const int file = context_->fileIndex();
    const bool scanned = file >= 0 && !scans_->busy() && scans_->scan(context_->file(file).path);
    statusText_->setText(scanned ? tr("%1 · step x layer overview done").arg(scanStatusText())
                                 : tr("step x layer overview done"));
  });
  connect(scans_->runner(), &TaskRunner::busyChanged, this, [this](bool busy) {
    // After the job's result is applied (queued behind this signal).
    if (!busy) QTimer::singleShot(0, this, [this] { statusText_->setText(scanStatusText()); });
  });
  connect(follower_, &DumpWatcher::followed, this, [this](const QString& file, int added) {
    statusText_->setText(
        tr("%1: %n new case(s) recorded", nullptr, added).arg(QFileInfo(file).fileName()));
  });
  // The overview's Cancel and Rescan stop and resume the case scan with the series.
  connect(overview_->cancelButton(), &QToolButton::clicked, scans_, &ScanController::cancel);
  connect(overview_->rescanButton(), &QToolButton::clicked, scans_, &ScanController::rescan);
}

void MainWindow::buildDebugMenu() {
  QMenu* debug = menuBar()->addMenu(tr("&Debug"));
  debug->setObjectName(QStringLiteral("debugMenu"));
  QAction* forward =
      debug->addAction(tr("Step &forward"), stepper_, &StepperController::stepForward);
  forward->setObjectName(QStringLiteral("stepForwardAction"));
  forward->setShortcut(QKeySequence(Qt::Key_F10));
  QAction* back = debug->addAction(tr("Step &back"), stepper_, &StepperController::stepBack);
  back->setObjectName(QStringLiteral("stepBackAction"));
  back->setShortcut(QKeySequence(Qt::SHIFT | Qt::Key_F10));
  QAction* run = debug->addAction(tr("&Run to next non-finite"), stepper_,
                                  &StepperController::runToNextNonfinite);
  run->setObjectName(QStringLiteral("runToNonfiniteAction"));
  run->setShortcut(QKeySequence(Qt::Key_F5));
  debug->addAction(tr("R&estart stepper"), stepper_, &StepperController::restart);
}

void MainWindow::buildStatusBar() {
  busy_ = new QProgressBar(this);
  busy_->setRange(0, 0);  // indeterminate: the kernels report no progress
  busy_->setMaximumWidth(140);
  busy_->setVisible(false);
  busy_->setObjectName(QStringLiteral("busyIndicator"));
  cancel_ = new QToolButton(this);
  cancel_->setText(tr("Cancel"));
  cancel_->setVisible(false);
  statusText_ = new QLabel(this);
  statusText_->setObjectName(QStringLiteral("statusText"));
  statusText_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);  // see status_ above
  statusBar()->addWidget(statusText_, 1);
  statusBar()->addPermanentWidget(busy_);
  statusBar()->addPermanentWidget(cancel_);
  // Showing the busy indicator must not change the status bar's height: a relayout of the
  // window would repaint every dock on each recompute.
  for (QWidget* w : {static_cast<QWidget*>(busy_), static_cast<QWidget*>(cancel_)}) {
    QSizePolicy policy = w->sizePolicy();
    policy.setRetainSizeWhenHidden(true);
    w->setSizePolicy(policy);
  }
  connect(cancel_, &QToolButton::clicked, this, [this] {
    worker_->cancel();
    analysis_->cancelAll();
    scans_->cancel();
    statusText_->setText(tr("recompute cancelled"));
  });
  cancelOpen_ = new QToolButton(this);
  cancelOpen_->setObjectName(QStringLiteral("cancelOpenButton"));
  cancelOpen_->setText(tr("Cancel open"));
  cancelOpen_->setToolTip(tr("Stop opening: the dumps still queued or being read are dropped"));
  cancelOpen_->setVisible(false);
  statusBar()->addPermanentWidget(cancelOpen_);
  connect(cancelOpen_, &QToolButton::clicked, this, [this] {
    opener_->cancel();
    statusText_->setText(tr("open cancelled"));
  });
  connect(opener_, &DumpOpener::started, this,
          [this](const QString& path) { statusText_->setText(tr("opening %1…").arg(path)); });
  connect(opener_, &DumpOpener::busyChanged, cancelOpen_, &QWidget::setVisible);
  connect(worker_, &ComputeWorker::busyChanged, this, [this](bool busy) {
    busy_->setVisible(busy);
    cancel_->setVisible(busy);
    if (busy) statusText_->setText(tr("recomputing…"));
  });
}

QString MainWindow::scanStatusText() const {
  const int file = context_->fileIndex();
  const auto scan = file < 0 ? nullptr : scans_->scan(context_->file(file).path);
  if (!scan) return tr("scan stopped");
  int errors = 0, warnings = 0;
  for (const ScannedCase& c : scan->cases) {
    if (c.state != ScanState::done || !c.verdict.worst) continue;
    errors += *c.verdict.worst == Severity::error;
    warnings += *c.verdict.worst == Severity::warning;
  }
  const QString counts = tr("%1 with errors, %2 with warnings").arg(errors).arg(warnings);
  if (!scan->complete()) {
    return tr("scan stopped after %1 of %2 cases: %3 (Rescan in the overview resumes it)")
        .arg(scan->done)
        .arg(scan->cases.size())
        .arg(counts);
  }
  const QString cases =
      scan->cases.size() == 1 ? tr("1 case") : tr("%1 cases").arg(scan->cases.size());
  return tr("scan done: %1, %2").arg(cases, counts);
}

void MainWindow::resetLayout() {
  restoreState(defaultState_, kStateVersion);
  for (QDockWidget* dock : docks_) {
    dock->setFloating(false);
    dock->setVisible(true);
  }
  findChild<QDockWidget*>(QStringLiteral("findingsDock"))->raise();
  pages_->setCurrentIndex(0);
  sizeDocksToWindow();  // the default sizes for the window's size now, not the first one
}

bool MainWindow::layoutWorthKeeping() const {
  // A dock squeezed to a sliver, or below what its panel needs, or pages under 40% of the
  // window are not worth restoring.
  for (const QDockWidget* dock : docks_) {
    const auto* scroll = qobject_cast<const QScrollArea*>(dock->widget());
    // Closed, floating and tabbed behind another: not taking room in the window.
    if (!dock->isVisible() || dock->isFloating() || scroll->visibleRegion().isEmpty()) continue;
    const QSize need = scroll->widget()->minimumSizeHint().boundedTo(QSize(400, 400));
    const QSize room = scroll->viewport()->size();
    if (room.width() < std::max(need.width(), kMinDockSide) ||
        room.height() < std::max(need.height(), kMinDockSide)) {
      return false;
    }
  }
  const QSize pages = pages_->size();
  return 5 * pages.width() * pages.height() >= 2 * width() * height();  // 40%
}

void MainWindow::setErrorHandler(ErrorHandler handler) {
  errorHandler_ = std::move(handler);
}

void MainWindow::showError(const QString& title, const QString& message, const QString& hint) {
  statusText_->setText(message);
  if (errorHandler_) errorHandler_(title, message, hint);
}

bool MainWindow::exportCurrentView(const QString& path, QString* error) {
  HeatmapView* view = heatmaps_->currentView();
  if (view == nullptr || view->grid() == nullptr) {
    if (error) *error = tr("nothing to export: no heatmap has been computed yet");
    return false;
  }
  const TileOutlinesHidden plain(heatmaps_);
  return exportView(view, path, figureStamp(*context_->result(), view->name()), error);
}

FigureStamp MainWindow::figureStamp(const HeadResult& result, const QString& view) const {
  FigureStamp stamp = stampFor(result, view);
  const auto summary = analysis_->summary();
  if (!summary || !analysis_->summaryCurrent() || summary->case_path != result.case_path) {
    return stamp;
  }
  stamp.findings = findingCaption(summary->findings);
  return stamp;
}

QString MainWindow::defaultExportName() const {
  // "seed_cases_fp16_score_overflow_S_b0h3_fp16-unfused.png": dump, case, view, head, run.
  const auto result = context_->result();
  HeatmapView* view = heatmaps_->currentView();
  if (!result || view == nullptr) return QStringLiteral("attnscope.png");
  QString casePart = QString::fromStdString(result->case_path);
  casePart.replace(QLatin1Char('/'), QLatin1Char('_'));
  QStringList parts{QFileInfo(QString::fromStdString(result->file_path)).completeBaseName(),
                    casePart.mid(casePart.startsWith(QLatin1Char('_')) ? 1 : 0), view->name(),
                    QStringLiteral("b%1h%2").arg(result->request.batch).arg(result->request.head),
                    QStringLiteral("%1-%2").arg(QLatin1String(precision_name(result->precision)),
                                                modeName(result->request.mode()))};
  const RunChoice& choice = context_->choice();
  if (choice.scale) parts << QStringLiteral("scale%1").arg(result->scale, 0, 'g', 6);
  if (choice.clip_norm) parts << QStringLiteral("clip%1").arg(*choice.clip_norm, 0, 'g', 6);
  QString name = parts.join(QLatin1Char('_'));
  name.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9._+-]")), QStringLiteral("_"));
  return name + QStringLiteral(".png");
}

bool MainWindow::awaitScoreGrids(QString* error) {
  const auto complete = [this] {
    const auto r = context_->result();
    return r && r->gradients && !r->s->empty() && !r->p->empty() && !r->dp->empty() &&
           !r->ds->empty();
  };
  if (complete()) return true;
  // Pooled grids are computed for the shown tab only: compute the others and wait.
  const ScoreSet shown = context_->scoresWanted();
  QEventLoop loop;
  QString failure;
  const QMetaObject::Connection done =
      connect(context_, &SessionContext::resultChanged, &loop, [&] {
        if (complete() || !context_->result()) loop.quit();
      });
  // Idle without the grids (cancelled, case closed): the result is applied after busy drops.
  const QMetaObject::Connection idle =
      connect(worker_, &ComputeWorker::busyChanged, &loop, [&](bool busy) {
        if (!busy)
          QTimer::singleShot(0, &loop, [&] {
            if (!worker_->busy()) loop.quit();
          });
      });
  const QMetaObject::Connection failed = connect(
      worker_, &ComputeWorker::failed, &loop, [&](quint64, const QString& message, const QString&) {
        failure = message;
        loop.quit();
      });
  statusText_->setText(tr("computing the score grids of every tab for the export…"));
  context_->setScoresWanted(kAllScores);
  if (!complete() && failure.isEmpty()) loop.exec();
  disconnect(done);
  disconnect(failed);
  disconnect(idle);
  context_->setScoresWanted(shown);
  if (complete()) return true;
  if (error) {
    *error = failure.isEmpty() ? tr("the score grids to export were not computed (cancelled)")
                               : tr("cannot compute the score grids to export: %1").arg(failure);
  }
  return false;
}

QStringList MainWindow::exportAllViews(const QString& folder, QString* error) {
  if (!context_->result()) {
    if (error) *error = tr("nothing to export: no heatmap has been computed yet");
    return {};
  }
  if (!awaitScoreGrids(error)) return {};
  const auto result = context_->result();
  QList<ViewExport> views;
  const AnnotationBoard* board = context_->annotations();
  for (HeadView v : kHeadViews) {
    const QString name = QString::fromLatin1(head_view_name(v));
    views.append({name, heatmaps_->view(v), board->drawn(name)});
  }
  const RowPlotExports rows(*result,
                            [board](const QString& v) { return board->userAnnotations(v); });
  views += rows.views();
  const TileOutlinesHidden plain(heatmaps_);
  return attnscope::exportAllViews(views, figureStamp(*result, QString()), folder, error);
}

void MainWindow::exportAllWithDialog() {
  const QString folder = QFileDialog::getExistingDirectory(this, tr("Export all views into"));
  if (folder.isEmpty()) return;
  QString error;
  const QStringList written = exportAllViews(folder, &error);
  if (error.isEmpty()) {
    statusText_->setText(tr("exported %1 files into %2").arg(written.size()).arg(folder));
  } else {
    showError(tr("Export failed"), error, tr("pick a writable folder"));
  }
}

void MainWindow::exportWithDialog() {
  // In the folder of the last export (else the dump's), under a name saying what it shows.
  QSettings settings;
  const auto result = context_->result();
  const QString dumpFolder =
      result ? QFileInfo(QString::fromStdString(result->file_path)).absolutePath() : QString();
  const QString folder = settings.value(kExportFolderKey, dumpFolder).toString();
  QString path = QFileDialog::getSaveFileName(
      this, tr("Export view"), QDir(folder).filePath(defaultExportName()),
      tr("PNG image (*.png);;PDF document (*.pdf);;SVG image (*.svg)"));
  if (path.isEmpty()) return;
  settings.setValue(kExportFolderKey, QFileInfo(path).absolutePath());
  if (!exportFormats().contains(QFileInfo(path).suffix().toLower())) path += QStringLiteral(".png");
  QString error;
  if (exportCurrentView(path, &error)) {
    statusText_->setText(tr("exported %1").arg(path));
  } else {
    showError(tr("Export failed"), error,
              tr("pick a writable folder and a .png, .pdf or .svg name"));
  }
}

void MainWindow::closeEvent(QCloseEvent* event) {
  viewState_->saveNow();
  QSettings settings;
  settings.setValue(kGeometryKey, saveGeometry());
  if (layoutWorthKeeping()) {
    settings.setValue(kStateKey, saveState(kStateVersion));
  } else {
    settings.remove(kStateKey);  // the next window opens with the default layout
  }
  event->accept();
}

}  // namespace attnscope
