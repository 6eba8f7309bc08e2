// The attnscope main window: pages in the centre (heatmap tabs, then origin, overview, row
// plots, stepper and scale sweep full-size), docks for the dump browser, controls, inspector,
// findings and annotations (Window menu re-opens any, layout saved and restorable), the menus
// and shortcuts, the status bar with the recompute's busy indicator (the recompute itself is
// the HeadComputeController's).
#pragma once

#include <QMainWindow>
#include <functional>

#include "app/gui/AppOptions.h"

class QAction;
class QDockWidget;
class QLabel;
class QStackedWidget;
class QTabWidget;
class QProgressBar;
class QToolButton;

namespace attnscope {

class AnalysisController;
class AnnotationController;
class CompareController;
class ComparePanel;
class AnnotationListPanel;
class ComputeWorker;
class ControlsPanel;
class DumpBrowserPanel;
class DumpOpener;
class FindingNavigator;
class HeadComputeController;
class HelpMenu;
class FindingsPanel;
class OriginPanel;
class OverviewPanel;
class HealthPanel;
class StepperController;
class StepperPanel;
class SweepPanel;
class HeatmapPanel;
class InspectorPanel;
class NavigationController;
class RowPlotPanel;
class DumpWatcher;
class ScanController;
class WhatIfBanner;
struct FigureStamp;
struct HeadResult;
class SessionContext;
class ViewStateController;

class MainWindow : public QMainWindow {
  Q_OBJECT

 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  SessionContext* context() const { return context_; }
  ComputeWorker* worker() const { return worker_; }
  HeadComputeController* headCompute() const { return headCompute_; }
  DumpBrowserPanel* browser() const { return browser_; }
  ControlsPanel* controls() const { return controls_; }
  InspectorPanel* inspector() const { return inspector_; }
  HeatmapPanel* heatmaps() const { return heatmaps_; }
  RowPlotPanel* rowPlots() const { return rowPlots_; }
  AnnotationController* annotations() const { return annotations_; }
  AnnotationListPanel* annotationList() const { return annotationList_; }
  NavigationController* navigation() const { return navigation_; }
  StepperController* stepper() const { return stepper_; }
  StepperPanel* stepperPanel() const { return stepperPanel_; }
  AnalysisController* analysis() const { return analysis_; }
  ScanController* scans() const { return scans_; }
  WhatIfBanner* whatIfBanner() const { return whatIfBanner_; }
  HelpMenu* help() const { return help_; }
  FindingNavigator* findingNavigator() const { return findingNavigator_; }
  FindingsPanel* findings() const { return findings_; }
  OverviewPanel* overview() const { return overview_; }
  OriginPanel* origin() const { return originPanel_; }
  SweepPanel* sweep() const { return sweep_; }
  CompareController* compare() const { return compare_; }
  ComparePanel* comparePanel() const { return comparePanel_; }
  // View > Compare two runs (Ctrl+K): the compare view in place of the heatmap tabs.
  QAction* compareAction() const { return compareAction_; }
  QList<QDockWidget*> docks() const;
  // The centre: Heatmaps (or compare), Origin, Overview, Row plots, Stepper, Scale sweep,
  // Health.
  QTabWidget* pages() const { return pages_; }
  HealthPanel* healthPanel() const { return health_; }

  // Opens FILE in the background (DumpOpener: requests run in order, the status bar shows
  // "opening FILE…" with a cancel) and then selects CASE (when none is named: the case last
  // shown according to the dump's sidecar session, else the first case). A run folder opens
  // every dump in it and selects in its lowest rank. `done` gets false after the error was
  // reported (unreadable file, unknown case) or when the open was cancelled.
  void open(const OpenTarget& target, std::function<void(bool ok)> done = {});
  // open() and wait for its outcome while the event loop runs (scripts, tests, the bench).
  bool openTarget(const OpenTarget& target);
  // Applies a parsed command line: opens the files, then applies settings, batch / head, matrix
  // tab and stepper position (so that they win over what the sidecar session restores);
  // `done` gets whether every file and case opened.
  void applyOptionsLater(const AppOptions& options, std::function<void(bool ok)> done = {});
  // applyOptionsLater() and wait for it while the event loop runs.
  bool applyOptions(const AppOptions& options);
  DumpOpener* opener() const { return opener_; }
  QToolButton* cancelOpenButton() const { return cancelOpen_; }

  // Writes the current heatmap tab to PNG / PDF / SVG (by suffix) with its annotations,
  // stamped with file, case, batch / head and settings; false with a message on failure.
  bool exportCurrentView(const QString& path, QString* error);
  // The export dialog's file name: dump, case, view, batch / head, precision-mode and the
  // scale / clip what-ifs, e.g. "seed_cases_fp16_score_overflow_S_b0h3_fp16-unfused.png".
  QString defaultExportName() const;
  // Writes every tab (PNG + SVG) and an index.html into `folder`; the files written, empty
  // with a message on failure.
  QStringList exportAllViews(const QString& folder, QString* error);

  // Where user-facing errors go. The default shows a window-modal QMessageBox (object name
  // "attnscopeError") without blocking the event loop; tests may replace it.
  using ErrorHandler =
      std::function<void(const QString& title, const QString& message, const QString& hint)>;
  void setErrorHandler(ErrorHandler handler);

  // "scan done: 37 cases, 21 with errors, 5 with warnings" for the shown file's scan.
  QString scanStatusText() const;
  void resetLayout();

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  QDockWidget* addPanelDock(QWidget* panel, const QString& title, const QString& objectName,
                            Qt::DockWidgetArea area);
  // Origin, Overview, Row plots, Stepper, Scale sweep after the Heatmaps page.
  void buildPages();
  // Adds `panel` as a full-size page beside the heatmaps; returns the page (its scroll area).
  QWidget* addPage(QWidget* panel, const QString& title);
  // `panel` in a scroll area of its own.
  QWidget* scrolled(QWidget* panel);
  // Whether the layout at close is worth restoring: no docked panel a sliver, the pages at
  // least 40% of the window (an accidental shrink comes back as the default layout).
  bool layoutWorthKeeping() const;
  // The default dock sizes for the window's current size.
  void sizeDocksToWindow();
  void buildMenus();
  // Makes the result hold all four score grids (pooled ones are computed per shown tab),
  // waiting for the compute while the event loop runs; false with a message when it fails.
  bool awaitScoreGrids(QString* error);
  void buildAnalysisDocks();
  void buildDebugMenu();
  void buildStatusBar();
  // The stamp of an exported figure of `result`: provenance and the case's findings as caption.
  FigureStamp figureStamp(const HeadResult& result, const QString& view) const;
  void applySettings(const AppOptions& options);
  bool selectOpened(int fileIndex, const OpenTarget& target);
  void showError(const QString& title, const QString& message, const QString& hint);
  void exportWithDialog();
  void exportAllWithDialog();

  SessionContext* context_ = nullptr;
  DumpOpener* opener_ = nullptr;
  HeadComputeController* headCompute_ = nullptr;
  ComputeWorker* worker_ = nullptr;  // headCompute_'s
  DumpBrowserPanel* browser_ = nullptr;
  ControlsPanel* controls_ = nullptr;
  InspectorPanel* inspector_ = nullptr;
  HeatmapPanel* heatmaps_ = nullptr;
  RowPlotPanel* rowPlots_ = nullptr;
  AnnotationController* annotations_ = nullptr;
  AnnotationListPanel* annotationList_ = nullptr;
  NavigationController* navigation_ = nullptr;
  FindingNavigator* findingNavigator_ = nullptr;
  ScanController* scans_ = nullptr;
  DumpWatcher* follower_ = nullptr;
  WhatIfBanner* whatIfBanner_ = nullptr;
  HelpMenu* help_ = nullptr;
  ViewStateController* viewState_ = nullptr;
  StepperController* stepper_ = nullptr;
  StepperPanel* stepperPanel_ = nullptr;
  AnalysisController* analysis_ = nullptr;
  FindingsPanel* findings_ = nullptr;
  OverviewPanel* overview_ = nullptr;
  HealthPanel* health_ = nullptr;
  QWidget* healthPage_ = nullptr;
  OriginPanel* originPanel_ = nullptr;
  SweepPanel* sweep_ = nullptr;
  CompareController* compare_ = nullptr;
  ComparePanel* comparePanel_ = nullptr;
  QStackedWidget* central_ = nullptr;  // the heatmap tabs or the compare view
  QTabWidget* pages_ = nullptr;        // central_ first, then the buildPages() ones
  QAction* compareAction_ = nullptr;
  QList<QDockWidget*> docks_;
  QByteArray defaultState_;
  QProgressBar* busy_ = nullptr;
  QToolButton* cancel_ = nullptr;
  QToolButton* cancelOpen_ = nullptr;
  QLabel* statusText_ = nullptr;
  ErrorHandler errorHandler_;
};

}  // namespace attnscope
