// The GUI test suite (Qt Test, offscreen): plain plot / compute units and the real MainWindow
// driven on the bundled sample dump. Each slot is one CTest test (gui.<slot>).
#pragma once

#include <QObject>
#include <QString>
#include <QTemporaryDir>
#include <functional>
#include <memory>

#include "app/gui/MainWindow.h"
#include "core/view/head_compute.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {

// The sample's case whose QK^T overflows fp16 in head 3.
inline const QString kOverflowCase = QStringLiteral("/fp16_score_overflow");
// The sample's padded fp16 case: batch 1's padded query rows turn NaN in the backward pass.
inline const QString kPaddingCase = QStringLiteral("/padding_mask_fp16");

// A shown MainWindow with errors collected instead of shown (unless keepDialogs).
struct WindowFixture {
  std::unique_ptr<MainWindow> window;
  QStringList errors;

  explicit WindowFixture(bool keepDialogs = false);
  SessionContext* context() const;
};

// True once the context holds a result for which `ok` holds and no compute is pending.
bool waitForResult(MainWindow& window, const std::function<bool(const HeadResult&)>& ok,
                   int timeoutMs = 60000);

class GuiTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();

  // PlotUnitTests.cpp
  void colormap_ends_map_to_end_stops();
  void colormap_never_paints_nonfinite();
  void log_and_symlog_scales_invert();
  void auto_range_ignores_rare_extremes_and_picks_the_map();
  void open_target_splits_file_and_case();
  void command_line_rejects_bad_values();

  // WindowTests.cpp
  void browser_lists_sample_cases();
  void browser_filter_hides_other_cases();
  void drop_opens_several_files();
  void fp16_unfused_overlay_head3_not_head0();
  void scale_entry_recomputes_with_new_scale();
  void scale_slider_and_reset();
  void stale_results_are_dropped();
  void background_runner_lowers_its_thread_and_the_threads_it_starts();
  void non_hdf5_file_shows_error_and_window_survives();
  void unknown_case_reports_error();
  void window_menu_lists_docks_and_resets_layout();
  void command_line_opens_case_with_settings();
  void title_and_status_bar_say_what_is_shown_and_done();
  void wheel_never_changes_an_unfocused_control();

  // ViewTests.cpp
  void inspector_shows_fp16_and_bf16_bits();
  void hover_and_click_pin_a_cell();
  void export_writes_png_and_pdf_atomically();
  void zoom_recomputes_pooled_window();
  void row_plot_shows_series_and_thresholds();
  void colour_maps_follow_the_values();

  // StepperTests.cpp
  void stepper_keys_step_and_highlight_tile();
  void run_to_next_nonfinite_lands_on_known_tile();
  void every_consumer_of_a_selected_case_shares_one_read();
  void stepper_position_belongs_to_its_case();
  void stepper_walks_the_kernel_on_screen();
  void run_to_nonfinite_searches_every_head();
  void pins_belong_to_their_case();

  // ControlTests.cpp
  void precision_fp16_to_bf16_makes_overflow_finite();
  void mask_fill_safe_zeroes_fully_masked_rows();
  void backend_picker_runs_registry_variant();
  void clip_norm_scales_gradients_and_reports();
  void scale_slider_says_when_no_scale_can_help();
  void one_head_compute_per_slider_tick();

  // AnalysisViewTests.cpp
  void findings_click_selects_head_and_location();
  void findings_list_never_shows_a_replaced_summary();
  void overview_heads_match_head_views();
  void series_overview_and_timeline_navigate_steps();
  void sweep_view_counts_nonfinite_per_precision();
  void gui_thread_stays_responsive_during_recompute();

  // HeadComputeTests.cpp
  void error_tabs_show_dk_and_dv_errors();
  void pooled_head_computes_shown_score_tab_and_exports_all();
  void scale_change_draws_the_forward_views_before_the_backward();

  // ScreenFitTests.cpp
  void window_fits_1366x768_screen();
  void laptop_layout_gives_the_heatmap_half_the_window();

  // LeadToProblemTests.cpp
  void browser_badges_show_each_cases_scan();
  void scan_and_findings_list_share_one_analysis();
  void opening_a_dump_leads_to_its_nan_origin();
  void f8_walks_findings_through_the_case_and_across_cases();
  void article_workflow_on_a_laptop_screen();

  // CompareTests.cpp
  void compare_view_shows_two_runs_side_by_side_zoomed_together();

  // DebuggerConventionsTests.cpp
  void help_menu_lists_shortcuts_and_versions();
  void home_and_double_click_show_the_whole_matrix();
  void window_shortcuts_work_while_a_text_field_has_focus();

 private:
  QTemporaryDir settingsDir_;
};

}  // namespace attnscope::test
