// Export, annotation, session-file and bad-file tests of the GUI (Qt Test, offscreen, label
// gui): a real MainWindow on a copy of the bundled sample dump (so sidecars land in a temporary
// folder), and attnscope-cli export run as a real process. Each slot is one CTest test
// (gui.export.<slot>).
#pragma once

#include <QObject>
#include <QString>
#include <QTemporaryDir>
#include <memory>

#include "app/gui/MainWindow.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {

// The hostile corpus and the CLI under test.
QString badCorpusDir();
QString cliPath();

// A shown MainWindow whose errors are collected (unless keepDialogs), opened on a case with
// the given settings and waited for until its first result is shown.
struct ExportWindow {
  std::unique_ptr<MainWindow> window;
  QStringList errors;

  explicit ExportWindow(bool keepDialogs = false);
  // Opens FILE::CASE at (batch 0, head), precision fp16 and mode; false when no result came.
  bool open(const QString& file, const QString& casePath, int head, Mode mode);
};

class ExportTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();

  // ExportTests.cpp
  void export_png_pdf_svg_carry_the_stamp();
  void export_replaces_atomically_and_rejects_bad_targets();
  void export_all_views_writes_images_and_index();

  // AnnotationTests.cpp
  void automatic_markers_find_first_nonfinite_and_max();
  void annotation_json_round_trip_rejects_garbage();
  void box_tool_places_annotation_with_the_mouse();
  void annotations_survive_closing_and_reopening();
  void two_windows_on_one_dump_keep_both_annotations();
  void corrupt_sidecar_is_kept_aside();
  void newer_session_version_keeps_unknown_fields();

  // CliExportTests.cpp
  void cli_export_writes_stamped_figures_headless();
  void cli_export_includes_sidecar_annotations();
  void clip_is_the_same_in_controls_findings_heatmaps_and_cli();
  void cli_export_rejects_bad_input_with_exit_2();
  void cli_export_killed_mid_write_keeps_a_complete_file();
  void bad_dumps_show_error_dialog_not_crash();

 private:
  QTemporaryDir settingsDir_;
};

}  // namespace attnscope::test
