// Leading the user to the problem on the real window (issue 15 item 2): the background scan's
// badge per case in the dump browser equals the case's scan verdict, opening the sample without
// a case to restore lands on its first error finding (case, mode, head, tab, findings row), and
// F8 / Shift+F8 walk the findings through the case and on to the neighbouring cases, whatever
// widget has the keyboard focus.
#include <QLineEdit>
#include <QTreeWidget>
#include <QtTest>

#include "app/gui/FindingNavigator.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/panels/DumpBrowserPanel.h"
#include "app/panels/FindingsPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/GuiTest.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {
namespace {

// The sample's first case (file order) with an error finding, as `attnscope-cli scan` reports
// it: precision_loss of dK at head 1, unfused only, then O at head 0 and dQ at head 1.
const QString kFirstErrorCase = QStringLiteral("/train/step_003/layer_00");

// Index of a case in the reader's (and the scan's) order.
size_t caseIndex(const SessionContext& ctx, const QString& path) {
  const auto& cases = ctx.reader()->cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].path == path.toStdString()) return i;
  }
  return cases.size();
}

// The window after opening the sample without a case, once it has led to the first error.
bool ledToFirstError(MainWindow& w) {
  return waitUntil([&] {
    return w.context()->casePath() == kFirstErrorCase &&
           w.context()->effectiveMode() == Mode::unfused && w.context()->head() == 1 &&
           w.heatmaps()->currentView()->name() == QStringLiteral("dK") &&
           w.findingNavigator()->current() == 0 && !w.findingNavigator()->leading();
  });
}

// The tensor of the finding the findings list marks as current.
QString currentFindingTensor(MainWindow& w) {
  const QTreeWidgetItem* item = w.findings()->list()->currentItem();
  return item ? item->text(2) : QString();
}

}  // namespace

void GuiTest::browser_badges_show_each_cases_scan() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitUntil([&] {
    const auto scan = f.window->scans()->scan(samplePath());
    return scan && scan->complete();
  }));
  const auto scan = f.window->scans()->scan(samplePath());
  QCOMPARE(static_cast<size_t>(scan->cases.size()), f.context()->reader()->cases().size());
  // Each badge's text is the verdict of the case scanned directly.
  for (const QString& path : {kOverflowCase, QStringLiteral("/exploding_grad"),
                              QStringLiteral("/train/step_000/layer_00"), kFirstErrorCase}) {
    const Result<CaseData> data = f.context()->reader()->load(path.toStdString());
    QVERIFY(data.ok());
    const Result<CaseVerdict> direct = scan_case(*data, 2, [] { return false; });
    QVERIFY(direct.ok());
    QCOMPARE(f.window->browser()->caseStatus(0, path),
             QString::fromStdString(verdict_text(*direct)));
  }
  QCOMPARE(f.window->browser()->caseStatus(0, QStringLiteral("/train/step_000/layer_00")),
           QStringLiteral("no findings"));
  QVERIFY(
      f.window->browser()->caseStatus(0, kOverflowCase).contains(QStringLiteral("score_overflow")));
  // Every case row carries a badge, its tooltip the status.
  for (QTreeWidgetItemIterator it(f.window->browser()->tree()); *it; ++it) {
    const QString path = (*it)->data(0, Qt::UserRole + 1).toString();
    if (path.isEmpty()) continue;
    QVERIFY2(!(*it)->icon(0).isNull(), qPrintable(path));
    QVERIFY2((*it)->toolTip(0).endsWith(f.window->browser()->caseStatus(0, path)),
             qPrintable(path));
  }
  QCOMPARE(scan->firstError().value_or(999), caseIndex(*f.context(), kFirstErrorCase));
}

void GuiTest::opening_a_dump_leads_to_its_first_error_finding() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), {}}));
  QVERIFY(ledToFirstError(*f.window));
  QCOMPARE(currentFindingTensor(*f.window), QStringLiteral("dK"));
  // A dump opened on a named case stays there.
  WindowFixture named;
  QVERIFY(named.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitUntil([&] {
    const auto scan = named.window->scans()->scan(samplePath());
    return scan && scan->complete();
  }));
  QCOMPARE(named.context()->casePath(), kOverflowCase);
}

void GuiTest::f8_walks_findings_through_the_case_and_across_cases() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), {}}));
  QVERIFY(ledToFirstError(*f.window));
  // Keyboard focus in the annotation label field: F8 still walks.
  auto* label = f.window->findChild<QLineEdit*>(QStringLiteral("annotationLabel"));
  QVERIFY(label);
  label->setFocus();
  QTest::keyClick(label, Qt::Key_F8);
  QVERIFY(waitUntil([&] {
    return f.window->findingNavigator()->current() == 1 && f.context()->head() == 0 &&
           f.window->heatmaps()->currentView()->name() == QStringLiteral("O");
  }));
  QCOMPARE(currentFindingTensor(*f.window), QStringLiteral("O"));
  QTest::keyClick(f.window.get(), Qt::Key_F8);
  QVERIFY(waitUntil([&] { return f.window->findingNavigator()->current() == 2; }));
  QCOMPARE(currentFindingTensor(*f.window), QStringLiteral("dQ"));

  // Past the case's last finding: the next case (scan order) with an error or warning.
  const auto scan = f.window->scans()->scan(samplePath());
  QString nextCase;
  for (size_t i = caseIndex(*f.context(), kFirstErrorCase) + 1;
       i < scan->cases.size() && nextCase.isEmpty(); ++i) {
    const ScannedCase& c = scan->cases[i];
    if (c.verdict.worst && *c.verdict.worst != Severity::info) {
      nextCase = QString::fromStdString(c.path);
    }
  }
  QVERIFY(!nextCase.isEmpty());
  QTest::keyClick(f.window.get(), Qt::Key_F8);
  QVERIFY(waitUntil([&] {
    return f.context()->casePath() == nextCase && f.window->findingNavigator()->current() == 0;
  }));
  // Shift+F8 goes back to the last finding of the case before.
  QTest::keyClick(f.window.get(), Qt::Key_F8, Qt::ShiftModifier);
  QVERIFY(waitUntil([&] {
    return f.context()->casePath() == kFirstErrorCase &&
           f.window->findingNavigator()->current() == 2;
  }));
  QCOMPARE(currentFindingTensor(*f.window), QStringLiteral("dQ"));
}

}  // namespace attnscope::test
