// The reproducer dialog (ReproDialog.h): a folder choice and the repro command's live report.
#include "app/gui/ReproDialog.h"

#include <QDesktopServices>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QUrl>
#include <QVBoxLayout>

#include "core/io/sibling_program.h"

namespace attnscope {

ReproDialog::ReproDialog(const QString& file, const QString& casePath, const QString& finding,
                         QWidget* parent)
    : QDialog(parent), file_(file), casePath_(casePath), finding_(finding) {
  setWindowTitle(tr("Make reproducer"));
  setObjectName(QStringLiteral("reproDialog"));
  const QFileInfo dump(file);
  const QString kind = finding.section(QLatin1Char(':'), 0, 0);
  auto* intro = new QLabel(
      tr("Shrinks %1 of %2 to the smallest part that still shows it as recorded, and writes "
         "repro.py (plain PyTorch), tensors.safetensors, case.h5, figure.png and README.md "
         "for an upstream bug report. repro.py is run here when the recorded kernel runs on "
         "this machine.")
          .arg(finding.section(QLatin1Char(':'), 0, 0) + tr(" on ") +
                   finding.section(QLatin1Char(':'), 1),
               dump.fileName() + QStringLiteral("::") + casePath),
      this);
  intro->setWordWrap(true);
  folder_ = new QLineEdit(
      dump.absoluteDir().filePath(dump.completeBaseName() + QStringLiteral("_repro_") + kind),
      this);
  folder_->setObjectName(QStringLiteral("reproFolder"));
  auto* choose = new QPushButton(tr("Choose…"), this);
  auto* row = new QHBoxLayout;
  row->addWidget(folder_, 1);
  row->addWidget(choose);
  auto* form = new QFormLayout;
  form->addRow(tr("Folder"), row);
  status_ = new QLabel(tr("not started"), this);
  status_->setObjectName(QStringLiteral("reproStatus"));
  status_->setWordWrap(true);
  report_ = new QPlainTextEdit(this);
  report_->setObjectName(QStringLiteral("reproReport"));
  report_->setReadOnly(true);
  report_->setLineWrapMode(QPlainTextEdit::WidgetWidth);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  make_ = buttons->addButton(tr("Make"), QDialogButtonBox::ActionRole);
  make_->setObjectName(QStringLiteral("reproMake"));
  make_->setDefault(true);
  open_ = buttons->addButton(tr("Open folder"), QDialogButtonBox::ActionRole);
  open_->setEnabled(false);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(intro);
  layout->addLayout(form);
  layout->addWidget(status_);
  layout->addWidget(report_, 1);
  layout->addWidget(buttons);
  resize(760, 460);

  connect(choose, &QPushButton::clicked, this, [this] {
    const QString dir =
        QFileDialog::getExistingDirectory(this, tr("Reproducer folder"), folder_->text());
    if (!dir.isEmpty()) folder_->setText(dir);
  });
  connect(make_, &QPushButton::clicked, this, &ReproDialog::make);
  connect(open_, &QPushButton::clicked, this,
          [this] { QDesktopServices::openUrl(QUrl::fromLocalFile(folder_->text())); });
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
}

ReproDialog::~ReproDialog() {
  if (running()) {
    process_->kill();
    process_->waitForFinished(2000);
  }
}

bool ReproDialog::running() const {
  return process_ != nullptr && process_->state() != QProcess::NotRunning;
}

void ReproDialog::make() {
  if (running()) return;
  const QString cli =
      QString::fromStdString(find_sibling_program("attnscope-cli", "cli", "ATTNSCOPE_CLI"));
  if (cli.isEmpty()) {
    status_->setText(tr("attnscope-cli was not found next to attnscope (set ATTNSCOPE_CLI)"));
    return;
  }
  report_->clear();
  exitCode_ = -1;
  make_->setEnabled(false);
  open_->setEnabled(false);
  status_->setText(tr("shrinking and verifying… (at most about a minute, then repro.py)"));
  delete process_;
  process_ = new QProcess(this);
  process_->setProcessChannelMode(QProcess::MergedChannels);
  connect(process_, &QProcess::readyRead, this, [this] {
    report_->moveCursor(QTextCursor::End);
    report_->insertPlainText(QString::fromLocal8Bit(process_->readAll()));
  });
  connect(process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus how) {
    finish(how == QProcess::NormalExit ? code : 2);
  });
  process_->start(
      cli, {QStringLiteral("repro"), file_ + QStringLiteral("::") + casePath_,
            QStringLiteral("--out"), folder_->text(), QStringLiteral("--finding"), finding_});
}

void ReproDialog::finish(int exitCode) {
  report_->moveCursor(QTextCursor::End);
  report_->insertPlainText(QString::fromLocal8Bit(process_->readAll()));
  exitCode_ = exitCode;
  make_->setEnabled(true);
  open_->setEnabled(exitCode != 2);
  // The command's verification line ("Reproduced (...)", "Not verified here: ...").
  QString verdict;
  for (const QString& line : report_->toPlainText().split(QLatin1Char('\n'))) {
    const QString t = line.trimmed();
    if (t.startsWith(QStringLiteral("Reproduced")) || t.startsWith(QStringLiteral("Not "))) {
      // Up to the command it ran: "Reproduced", or the whole "Not verified here: ... :
      // reproduced" sentence.
      verdict = t.section(QStringLiteral(" (`"), 0, 0);
      if (verdict.endsWith(QLatin1Char(':'))) verdict.chop(1);
    }
  }
  if (exitCode == 0) {
    status_->setText(tr("<b>%1.</b> Bundle written to %2.")
                         .arg(verdict.toHtmlEscaped(), folder_->text().toHtmlEscaped()));
  } else if (exitCode == 1) {
    status_->setText(tr("Bundle written to %1, but repro.py did not reproduce it here (see "
                        "the report).")
                         .arg(folder_->text()));
  } else {
    status_->setText(tr("No reproducer: see the report."));
  }
  emit made(exitCode);
}

}  // namespace attnscope
