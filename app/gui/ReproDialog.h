// "Make reproducer…" of a finding (issue 46): runs `attnscope-cli repro FILE::CASE --out DIR
// --finding KIND:TENSOR` (the same code path as the command line) in a child process and shows
// its report: the shrunk shape, what was kept and why, and whether repro.py reproduced it.
#pragma once

#include <QDialog>

class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProcess;
class QPushButton;

namespace attnscope {

class ReproDialog : public QDialog {
  Q_OBJECT

 public:
  // `finding` as --finding takes it ("score_overflow:S"). The folder defaults to
  // "<dump folder>/<dump name>_repro_<kind>".
  ReproDialog(const QString& file, const QString& casePath, const QString& finding,
              QWidget* parent = nullptr);
  ~ReproDialog() override;

  QLineEdit* folder() const { return folder_; }
  QPushButton* makeButton() const { return make_; }
  QPlainTextEdit* report() const { return report_; }
  QLabel* status() const { return status_; }
  bool running() const;
  // The command's exit status once it finished (0 written and reproduced or not verifiable
  // here, 1 not reproduced, 2 failed); -1 before.
  int exitCode() const { return exitCode_; }

  // Starts the command (what the Make button does).
  void make();

 signals:
  void made(int exitCode);

 private:
  void finish(int exitCode);

  QString file_, casePath_, finding_;
  QLineEdit* folder_ = nullptr;
  QPushButton* make_ = nullptr;
  QPushButton* open_ = nullptr;
  QPlainTextEdit* report_ = nullptr;
  QLabel* status_ = nullptr;
  QProcess* process_ = nullptr;
  int exitCode_ = -1;
};

}  // namespace attnscope
