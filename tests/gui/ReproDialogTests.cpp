// "Make reproducer…" in the findings list (issue 46): the sample's fp16 score overflow opened
// as a user opens it, the finding selected, the button clicked; the dialog runs the real
// attnscope-cli repro into the folder it proposes next to the dump and shows the shrunk shape
// and that repro.py reproduced it with the venv's torch.
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTreeWidget>
#include <QtTest>

#include "app/gui/AnalysisController.h"
#include "app/gui/ReproDialog.h"
#include "app/gui/SessionContext.h"
#include "app/panels/FindingsPanel.h"
#include "tests/gui/ViewGapTest.h"

namespace attnscope::test {

void ViewGapTest::make_reproducer_from_a_finding() {
  QTemporaryDir out;
  QVERIFY(out.isValid());
  const QString dump = out.filePath(QStringLiteral("seed_cases.h5"));
  QVERIFY(QFile::copy(samplePath(), dump));
  qputenv("ATTNSCOPE_CLI", ATTNSCOPE_CLI_PATH);
  qputenv("ATTNSCOPE_PYTHON", ATTNSCOPE_PYTHON);
  ShownWindow w;
  QVERIFY(w.window->openTarget({dump, QStringLiteral("/fp16_score_overflow")}));
  FindingsPanel* findings = w.window->findings();
  QVERIFY(waitShown([&] { return findings->rowOfKind(QStringLiteral("score_overflow")) >= 0; }));
  // Nothing selected yet: the button acts on the worst finding, the overflow.
  QCOMPARE(findings->rowOfKind(QStringLiteral("score_overflow")), 0);
  QVERIFY(findings->reproButton()->isEnabled());
  QVERIFY(findings->reproButton()->toolTip().contains(QStringLiteral("score_overflow")));
  QTest::mouseClick(findings->reproButton(), Qt::LeftButton);
  ReproDialog* dialog = w.window->findChild<ReproDialog*>(QStringLiteral("reproDialog"));
  QVERIFY(dialog != nullptr);
  QVERIFY(dialog->isVisible());
  const QString folder = out.filePath(QStringLiteral("seed_cases_repro_score_overflow"));
  QCOMPARE(dialog->folder()->text(), folder);
  QTest::mouseClick(dialog->makeButton(), Qt::LeftButton);
  QVERIFY(dialog->running());
  QVERIFY(waitShown([&] { return dialog->exitCode() >= 0; }, 300000));
  const QString report = dialog->report()->toPlainText();
  QVERIFY2(dialog->exitCode() == 0, qPrintable(report));
  QVERIFY2(report.contains(QStringLiteral("-> B=1 H=1 Sq=1 D=64")), qPrintable(report));
  QVERIFY2(report.contains(QStringLiteral("Reproduced")), qPrintable(report));
  QVERIFY2(dialog->status()->text().startsWith(QStringLiteral("<b>Reproduced.</b> Bundle written")),
           qPrintable(dialog->status()->text()));
  for (const char* f : {"repro.py", "tensors.safetensors", "case.h5", "README.md"}) {
    QVERIFY2(QFile::exists(folder + QLatin1Char('/') + QLatin1String(f)), f);
  }
  // A what-if's findings have no reproducer: the button says why.
  w.window->context()->setPrecision(Precision::bf16);
  QVERIFY(waitShown([&] {
    const auto s = w.window->analysis()->summary();
    return s && w.window->analysis()->summaryCurrent() && s->precision == Precision::bf16 &&
           findings->findingCount() > 0;
  }));
  findings->selectRow(0);
  QVERIFY(!findings->reproButton()->isEnabled());
  QVERIFY(findings->reproButton()->toolTip().contains(QStringLiteral("reset the what-if")));
  QVERIFY2(w.errors.isEmpty(), qPrintable(w.errors.join(QLatin1Char('\n'))));
}

}  // namespace attnscope::test
