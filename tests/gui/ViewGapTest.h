// Tests of the session, overview and controls behaviour of the real MainWindow (Qt Test,
// offscreen, label gui): view state saved for dumps never annotated (beside the dump, or in the
// per-user data folder when its folder is read-only), a zoom per heatmap tab, the gradient-norm
// metrics of the overviews, failed cases of the (step x layer) overview, greyed backends,
// annotations on the row plot, .pt / .npz / .safetensors files opened in the window, a dump
// that grows while it is shown, a run folder opened as one run, and a real model's dump opened
// where its NaN starts. Each slot is one CTest test (gui.session.<slot>).
#pragma once

#include <QObject>
#include <QTemporaryDir>
#include <vector>

#include "tests/gui/ShownWindow.h"

namespace attnscope::test {

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

  // BugReportFileTests.cpp
  void bug_report_files_open_in_the_window();

  // LiveDumpTests.cpp
  void dump_recorded_while_open_fills_in();

  // RunFolderTests.cpp
  void run_folder_opens_as_one_run();
  void dropped_run_folder_orders_ranks_by_attribute();
  void run_folder_leads_to_the_runs_first_bad_case();

  // OriginTests.cpp
  void minilm_overflow_dump_opens_where_its_nan_starts();

  // HealthPageTests.cpp
  void health_page_leads_to_the_head_that_overflows();

  // ReproDialogTests.cpp
  void make_reproducer_from_a_finding();

 private:
  QTemporaryDir settingsDir_;
  QTemporaryDir dataHome_;
};

}  // namespace attnscope::test
