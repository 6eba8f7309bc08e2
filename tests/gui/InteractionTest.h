// Interaction tests of the real MainWindow (Qt Test, offscreen, label gui): Ctrl+G go to a cell,
// the annotation list (select, edit, delete) and moving / editing annotations on the plot,
// the view state restored from the sidecar session, and Alt+arrow navigation through the steps
// and layers of a multi-step dump. Each slot is one CTest test (gui.interaction.<slot>).
#pragma once

#include <QObject>
#include <QString>
#include <QTemporaryDir>
#include <functional>
#include <memory>

#include "app/gui/HeadCompute.h"
#include "app/gui/MainWindow.h"

namespace attnscope::test {

// The bundled sample dump.
QString samplePath();

// A copy of the sample in its own temporary folder (its sidecar is written next to it).
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
  // Waits (up to 2 minutes) until a result of `casePath` at `head` is shown with no compute
  // pending and `ok` holds for it.
  bool waitForHead(const QString& casePath, int64_t head,
                   const std::function<bool(const HeadResult&)>& ok = {});
};

// Processes events until `done` holds (up to timeoutMs); its final value.
bool waitUntil(const std::function<bool()>& done, int timeoutMs = 60000);

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

 private:
  QTemporaryDir settingsDir_;
};

}  // namespace attnscope::test
