// Leading the user to the problem on the real window (issue 15 items 2 and 9, issue 40 item 2):
// the background scan's badge per case in the dump browser equals the case's scan verdict,
// opening the sample without a case to restore lands on the origin of its first NaN in
// execution order (case, mode, head, the stage's tab, findings row) as `attnscope-cli scan`
// names it, the Origin list and "Go to first error" lead there too, F8 / Shift+F8 walk the
// findings through the case and on to the neighbouring cases, whatever widget has the
// keyboard focus, and the article's whole workflow on a laptop screen.
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTreeWidget>
#include <QtTest>

#include "app/gui/AnalysisController.h"
#include "app/gui/CompareController.h"
#include "app/gui/FindingNavigator.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/StepperController.h"
#include "app/panels/ControlsPanel.h"
#include "app/panels/DumpBrowserPanel.h"
#include "app/panels/FindingsPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/OriginPanel.h"
#include "app/panels/StepperPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/GuiTest.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {
namespace {

// The sample's first case (file order) with an error finding: precision_loss of dK at head 1,
// unfused only, then O at head 0 and dQ at head 1.
const QString kFirstErrorCase = QStringLiteral("/train/step_003/layer_00");
// Where `attnscope-cli scan` says the sample's first NaN appears, in execution order: step 5's
// forward of layer 0, where fp16 Q K^T overflows in unfused mode (head 0 first).
const QString kNanOriginCase = QStringLiteral("/train/step_005/layer_00");
// The first bad case `scan` names: step 3's backward starts at layer 3 (precision_loss of dK).
const QString kFirstBadCase = QStringLiteral("/train/step_003/layer_03");

// Index of a case in the reader's (and the scan's) order.
size_t caseIndex(const SessionContext& ctx, const QString& path) {
  const auto& cases = ctx.reader()->cases();
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].path == path.toStdString()) return i;
  }
  return cases.size();
}

// The window after opening the sample without a case, once it has led to the NaN origin: the
// overflowing scores of head 0 in unfused fp16, on S, its finding the current row.
bool ledToNanOrigin(MainWindow& w) {
  return waitUntil([&] {
    const auto s = w.analysis()->summary();
    const int current = w.findingNavigator()->current();
    return w.context()->casePath() == kNanOriginCase &&
           w.context()->effectiveMode() == Mode::unfused && w.context()->head() == 0 &&
           w.heatmaps()->currentView()->name() == QStringLiteral("S") && s && current >= 0 &&
           s->findings[static_cast<size_t>(current)].kind == FindingKind::score_overflow &&
           !w.findingNavigator()->leading();
  });
}

// The tensor of the finding the findings list marks as current.
QString currentFindingTensor(MainWindow& w) {
  const QTreeWidgetItem* item = w.findings()->list()->currentItem();
  return item ? item->text(2) : QString();
}

// Whether the findings list shows exactly the current summary's findings, row by row (severity,
// kind, tensor), under a header that counts the same errors: no row of an earlier list stays.
bool findingsListIsCurrent(MainWindow& w, QString* why) {
  const auto s = w.analysis()->summary();
  const QTreeWidget* list = w.findings()->list();
  if (!s || !w.analysis()->summaryCurrent()) {
    *why = QStringLiteral("no current summary");
    return false;
  }
  if (static_cast<size_t>(list->topLevelItemCount()) != s->findings.size()) {
    *why = QStringLiteral("%1 rows for %2 findings")
               .arg(list->topLevelItemCount())
               .arg(s->findings.size());
    return false;
  }
  for (size_t i = 0; i < s->findings.size(); ++i) {
    const QTreeWidgetItem* row = list->topLevelItem(static_cast<int>(i));
    const Finding& f = s->findings[i];
    if (row->text(0) != QLatin1String(severity_name(f.severity)) ||
        row->text(1) != QLatin1String(finding_kind_name(f.kind)) ||
        row->text(2) != QString::fromStdString(f.tensor)) {
      *why = QStringLiteral("row %1 reads %2 %3 %4")
                 .arg(i)
                 .arg(row->text(0), row->text(1), row->text(2));
      return false;
    }
  }
  return true;
}

bool hasFinding(const CaseSummary& s, FindingKind kind, int64_t head) {
  return std::any_of(s.findings.begin(), s.findings.end(),
                     [&](const Finding& f) { return f.kind == kind && f.head == head; });
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
    const Result<CaseAnalysis> direct = analyze_case(*data, AnalysisSettings{});
    QVERIFY(direct.ok());
    QCOMPARE(f.window->browser()->caseStatus(0, path),
             QString::fromStdString(verdict_text(scan_verdict(data->info, direct->findings))));
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

// At the recorded run the badge's verdict and the findings list of the shown case come from one
// analysis (a real-size layer's is about a gigabyte); a what-if gets its own.
void GuiTest::scan_and_findings_list_share_one_analysis() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitUntil([&] {
    const auto scan = f.window->scans()->scan(samplePath());
    return scan && scan->complete() && f.window->analysis()->summaryCurrent();
  }));
  const SummaryStore& store = *f.context()->file(0).summaries;
  const auto shown = f.window->analysis()->summary();
  QVERIFY(shown != nullptr);
  QCOMPARE(shown.get(), store.find(kOverflowCase.toStdString()).get());
  const ScannedCase* scanned =
      f.window->scans()->scan(samplePath())->find(kOverflowCase.toStdString());
  QVERIFY(scanned != nullptr);
  QCOMPARE(scanned->verdict.errors, verdict_of(shown->findings).errors);
  QVERIFY(scanned->verdict.errors > 0);

  f.context()->setScale(f.context()->defaultScale() * 0.5);  // a what-if: analysed on its own
  QVERIFY(waitUntil([&] { return f.window->analysis()->summaryCurrent(); }));
  QVERIFY(f.window->analysis()->summary().get() != store.find(kOverflowCase.toStdString()).get());
  QVERIFY(f.window->analysis()->summary()->judged_under.rfind("what-if", 0) == 0);
}

void GuiTest::opening_a_dump_leads_to_its_nan_origin() {
  WindowFixture f;
  std::optional<CellReadout> pinned;
  QObject::connect(f.context(), &SessionContext::cellPinned,
                   [&](const CellReadout& r) { pinned = r; });
  QVERIFY(f.window->openTarget({samplePath(), {}}));
  QVERIFY(ledToNanOrigin(*f.window));
  QCOMPARE(currentFindingTensor(*f.window), QStringLiteral("S"));
  // The inspector pins the first non-finite cell of S (row-major) in head 0.
  QVERIFY(waitUntil([&] { return pinned.has_value(); }));
  QCOMPARE(QString::fromStdString(pinned->matrix), QStringLiteral("S"));
  const MatrixGrid& s = *f.context()->result()->s;
  const auto first = std::find_if(s.cls.begin(), s.cls.end(), [](CellClass c) {
    return c != CellClass::finite && c != CellClass::masked;
  });
  QVERIFY(first != s.cls.end() && !s.pooled);
  QCOMPARE(pinned->row, (first - s.cls.begin()) / s.cols + s.row_edges.front());
  QCOMPARE(pinned->col, (first - s.cls.begin()) % s.cols + s.col_edges.front());
  QVERIFY(pinned->cls == CellClass::pos_inf || pinned->cls == CellClass::nan);
  // The CLI names the same place.
  const QJsonObject scan = cliScanJson(samplePath());
  const QJsonObject origin = scan.value(QStringLiteral("first_bad"))
                                 .toObject()
                                 .value(QStringLiteral("nonfinite_origin"))
                                 .toObject();
  QCOMPARE(origin.value(QStringLiteral("path")).toString(), kNanOriginCase);
  QCOMPARE(origin.value(QStringLiteral("site")).toObject().value(QStringLiteral("view")).toString(),
           QStringLiteral("S"));
  QCOMPARE(origin.value(QStringLiteral("site")).toObject().value(QStringLiteral("head")).toInt(),
           0);
  // The Origin list starts with that case's forward; the S tab marks its first +inf cell.
  QTreeWidget* list = f.window->origin()->list();
  QVERIFY(waitUntil([&] { return list->topLevelItemCount() > 0; }));
  QVERIFY(list->topLevelItem(0)->text(0).contains(QStringLiteral("step 5, layer 0, forward")));
  QCOMPARE(list->topLevelItem(0)->child(0)->text(1), QStringLiteral("S"));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.case_path == kNanOriginCase.toStdString() && r.request.head == 0 &&
           r.request.mode() == Mode::unfused;
  }));
  QVERIFY(f.window->heatmaps()->view(HeadView::s)->overlayCounts().pos_inf > 0);
  // Go to first error: the case `scan` names first bad, its dK finding in unfused mode.
  f.window->findingNavigator()->firstErrorAction()->trigger();
  QVERIFY(waitUntil([&] {
    return f.context()->casePath() == kFirstBadCase && f.context()->head() == 1 &&
           f.window->heatmaps()->currentView()->name() == QStringLiteral("dK") &&
           f.context()->effectiveMode() == Mode::unfused;
  }));
  // An Origin row leads back (one click), and so does Go to NaN origin.
  f.window->origin()->activate(0, 0);
  QVERIFY(ledToNanOrigin(*f.window));
  f.context()->selectCase(0, kFirstBadCase);
  f.window->findingNavigator()->originAction()->trigger();
  QVERIFY(ledToNanOrigin(*f.window));
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
  QVERIFY(f.window->openTarget({samplePath(), kFirstErrorCase}));
  // Its findings are unfused-only (the browser badge says so): the user shows that mode.
  f.context()->setMode(Mode::unfused);
  QVERIFY(waitUntil([&] {
    const auto scan = f.window->scans()->scan(samplePath());
    const auto s = f.window->analysis()->summary();
    return scan && scan->complete() && f.window->analysis()->summaryCurrent() &&
           s->case_path == kFirstErrorCase.toStdString() && !s->findings.empty();
  }));
  QTest::keyClick(f.window.get(), Qt::Key_F8);
  QVERIFY(waitUntil([&] {
    return f.window->findingNavigator()->current() == 0 && f.context()->head() == 1 &&
           f.window->heatmaps()->currentView()->name() == QStringLiteral("dK");
  }));
  QCOMPARE(currentFindingTensor(*f.window), QStringLiteral("dK"));
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

void GuiTest::article_workflow_on_a_laptop_screen() {
  WindowFixture f;
  f.window->resize(1366, 740);
  f.window->activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(f.window.get()));
  QString why;
  const auto findingsCurrent = [&] {
    return waitUntil([&] { return findingsListIsCurrent(*f.window, &why); });
  };

  // 1. Find the problem: opening the dump is the one action that reaches where its NaN starts.
  QVERIFY(f.window->openTarget({samplePath(), {}}));
  QVERIFY(ledToNanOrigin(*f.window));
  QVERIFY2(findingsCurrent(), qPrintable(why));
  QVERIFY2(fitsLaptop(*f.window, &why), qPrintable(why));

  // 2. The overflowing head in fp16 as an eager (unfused) attention runs it: S has +inf
  // cells, the finding says why, and the scale slider says that no scale helps.
  QVERIFY(f.context()->selectCase(0, kOverflowCase));
  f.context()->setHead(3);
  f.context()->setPrecision(Precision::f16);
  f.context()->setMode(Mode::unfused);
  f.context()->showView(HeadView::s);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.case_path == kOverflowCase.toStdString() && r.request.head == 3 &&
           r.request.mode() == Mode::unfused && r.precision == Precision::f16;
  }));
  QVERIFY(f.window->heatmaps()->view(HeadView::s)->overlayCounts().pos_inf > 0);
  QVERIFY2(findingsCurrent(), qPrintable(why));
  QVERIFY(hasFinding(*f.window->analysis()->summary(), FindingKind::score_overflow, 3));
  QVERIFY(waitUntil([&] { return !f.window->controls()->scaleNote()->isHidden(); }));

  // 3. Fused against unfused, side by side: only the unfused run (A) broke.
  QTest::keyClick(f.window.get(), Qt::Key_K, Qt::ControlModifier);
  QVERIFY(waitUntil([&] {
    const auto c = f.window->compare()->comparison();
    return c && !f.window->compare()->busy() && c->a && c->a->request.head == 3 &&
           c->a->case_path == kOverflowCase.toStdString() && c->difference;
  }));
  const auto c = f.window->compare()->comparison();
  QCOMPARE(c->b->request.mode(), Mode::fused);
  QVERIFY(c->difference->only_a > 0);
  QCOMPARE(c->difference->only_b, int64_t{0});
  QTest::keyClick(f.window.get(), Qt::Key_K, Qt::ControlModifier);
  QVERIFY(f.window->heatmaps()->isVisible());

  // 4. bf16 has fp32's range: S is finite, the overflow finding and the scale note go, and no
  // row of the fp16 list stays.
  f.context()->setPrecision(Precision::bf16);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.request.head == 3 && r.precision == Precision::bf16;
  }));
  QCOMPARE(f.window->heatmaps()->view(HeadView::s)->overlayCounts().nonfinite(), int64_t{0});
  QVERIFY2(findingsCurrent(), qPrintable(why));
  QVERIFY(!hasFinding(*f.window->analysis()->summary(), FindingKind::score_overflow, 3));
  QVERIFY(f.window->controls()->scaleNote()->isHidden());

  // 5. Back to what the padded case recorded (one action), then step its backward pass to
  // where it turns NaN (F5).
  QVERIFY(f.context()->selectCase(0, kPaddingCase));
  auto* reset = f.window->findChild<QPushButton*>(QStringLiteral("resetToRecordedButton"));
  QVERIFY(reset && reset->isVisible());  // the banner says bf16 is a what-if
  reset->click();
  QVERIFY(f.context()->whatIfs().isEmpty());
  f.context()->setBatch(1);
  QTest::keyClick(f.window.get(), Qt::Key_F5);
  QVERIFY(waitUntil([&] {
    const auto snap = f.window->stepper()->snapshot();
    return snap && snap->case_path == kPaddingCase.toStdString() && snap->position > 0;
  }));
  const auto snap = f.window->stepper()->snapshot();
  QVERIFY2(snap->found, qPrintable(QStringLiteral("batch %1 position %2 of %3 %4")
                                       .arg(snap->batch)
                                       .arg(snap->position)
                                       .arg(snap->size)
                                       .arg(f.window->stepperPanel()->summary())));
  QVERIFY(f.window->stepperPanel()->summary().contains(QStringLiteral("stopped")));
  QVERIFY2(findingsCurrent(), qPrintable(why));

  // 6. Export the view for the bug report.
  QTemporaryDir out;
  const QString png = out.filePath(QStringLiteral("s.png"));
  QString error;
  QVERIFY2(f.window->exportCurrentView(png, &error), qPrintable(error));
  QVERIFY(QImage(png).width() > 0);

  // The window never grew beyond the screen on the way.
  QVERIFY2(fitsLaptop(*f.window, &why), qPrintable(why));
  QVERIFY2(f.window->width() <= 1366 && f.window->height() <= 740,
           qPrintable(QStringLiteral("%1x%2").arg(f.window->width()).arg(f.window->height())));
}

}  // namespace attnscope::test
