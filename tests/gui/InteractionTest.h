// Interaction tests of the real MainWindow (Qt Test, offscreen, label gui): Ctrl+G go to a cell,
// the annotation list (select, edit, delete) and moving / editing annotations on the plot,
// the view state restored from the sidecar session, what-ifs kept on request, and Alt+arrow
// navigation through the steps and layers of a multi-step dump. Each slot is one CTest test
// (gui.interaction.<slot>).
#pragma once

#include <QObject>
#include <QTemporaryDir>

#include "tests/gui/ShownWindow.h"

namespace attnscope::test {

class InteractionTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();

  // GoToTests.cpp
  void go_to_cell_pins_exact_value_on_pooled_scores();
  void go_to_cell_on_feature_tabs_and_range_errors();
  void alt_arrows_move_through_steps_and_layers();
  void stepper_option_shows_a_backward_tile();

  // AnnotationListTests.cpp
  void annotation_list_edits_reach_the_sidecar();
  void annotations_move_and_edit_on_the_plot();

  // ViewStateTests.cpp
  void view_state_is_restored_on_reopen();
  void version_1_sidecar_still_restores();
  void command_line_wins_over_the_saved_view();

  // WhatIfTests.cpp
  void what_ifs_are_kept_only_on_request_and_reset_in_one_click();
  void banner_findings_and_cli_agree_on_every_choice();
  void banner_says_which_recorded_outputs_a_what_if_reproduces();
  void what_ifs_do_not_carry_over_to_another_dump();
  void inspector_and_colour_range_belong_to_the_case_shown();
  void window_judges_a_case_as_its_analysis_inferred();

 private:
  QTemporaryDir settingsDir_;
};

}  // namespace attnscope::test
