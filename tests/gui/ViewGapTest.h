// Tests of the session, overview and controls behaviour of the real MainWindow (Qt Test,
// offscreen, label gui): view state saved for dumps never annotated (beside the dump, or in the
// per-user data folder when its folder is read-only), a zoom per heatmap tab, the gradient-norm
// metrics of the overviews, failed cases of the (step x layer) overview, greyed backends and
// annotations on the row plot. Each slot is one CTest test (gui.session.<slot>).
#pragma once

#include <QObject>
#include <QString>
#include <QTemporaryDir>
#include <functional>
#include <memory>

#include "app/gui/HeadCompute.h"
#include "app/gui/MainWindow.h"

namespace attnscope::test {

// The bundled sample dump, and a copy of it in its own temporary folder.
QString samplePath();
struct SampleCopy {
  QTemporaryDir dir;
  QString path;
  SampleCopy();
};

// A shown, active MainWindow whose error dialogs are collected in `errors`.
struct ShownWindow {
  std::unique_ptr<MainWindow> window;
  QStringList errors;
  ShownWindow();
  SessionContext* context() const;
  // Waits (up to 2 minutes) until a result of `casePath` at `head` is shown, nothing computes.
  bool waitForHead(const QString& casePath, int64_t head);
};

// Processes events until `done` holds (up to timeoutMs); its final value.
bool waitUntil(const std::function<bool()>& done, int timeoutMs = 60000);

// Deterministic float32 values of a tensor ((i * 37 + seed * 11) % 101 - 50) / 16.
std::vector<double> tensorValues(int64_t n, int seed);

class ViewGapTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();

  // SessionAutosaveTests.cpp
  void view_state_of_unannotated_dump_is_restored();
  void read_only_folder_keeps_session_per_user();
  void each_heatmap_tab_restores_its_zoom();

  // OverviewGapTests.cpp
  void gradient_norm_metrics_match_direct_computation();
  void series_overview_shows_error_cell_and_other_values();
  void unsupported_backend_is_greyed_with_reason();

  // RowPlotAnnotationTests.cpp
  void row_plot_annotations_persist_and_export();
  void annotation_list_jumps_to_row_plot_series();

  // BrokenCaseTests.cpp
  void broken_case_is_greyed_and_explained_in_browser();
  void rejected_group_row_names_it_once();

 private:
  QTemporaryDir settingsDir_;
  QTemporaryDir dataHome_;
};

}  // namespace attnscope::test
