// The real MainWindow on the sample dump: browser, overlays per head, recompute on scale
// changes, stale results, error reporting, the Window menu and the command line.
#include <sys/resource.h>
#include <unistd.h>

#include <QComboBox>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QSlider>
#include <QStatusBar>
#include <QTabWidget>
#include <QToolButton>
#include <QTreeWidget>
#include <QtTest>
#include <algorithm>
#include <optional>
#include <thread>
#include <utility>

#include "app/gui/ComputeWorker.h"
#include "app/gui/DumpOpener.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/TaskRunner.h"
#include "app/panels/ControlsPanel.h"
#include "app/panels/DumpBrowserPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/panels/StepperPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/GuiTest.h"

namespace attnscope::test {
namespace {

bool isSelection(const HeadResult& r, int64_t head, Precision p, Mode m) {
  return r.request.head == head && r.precision == p && r.request.mode() == m;
}

// Cases of an open file whose path or name contains `text` (the browser's filter rule).
int matchingCases(const SessionContext& ctx, int file, const QString& text) {
  int n = 0;
  for (const CaseInfo& c : ctx.file(file).reader->cases()) {
    n += QString::fromStdString(c.path).contains(text, Qt::CaseInsensitive) ||
         QString::fromStdString(c.config.name).contains(text, Qt::CaseInsensitive);
  }
  return n;
}

}  // namespace

void GuiTest::browser_lists_sample_cases() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  const QStringList paths = f.window->browser()->casePaths(0);
  QVERIFY(paths.size() >= 36);
  QCOMPARE(static_cast<size_t>(paths.size()), f.context()->file(0).reader->cases().size());
  QVERIFY(paths.contains(kOverflowCase));
  QVERIFY(paths.contains(QStringLiteral("/train/step_007/layer_03")));
  QVERIFY(paths.contains(QStringLiteral("/healthy_b2_h8_s1024")));
  // The file node groups the training cases by step.
  QTreeWidgetItem* file = f.window->browser()->tree()->topLevelItem(0);
  QCOMPARE(file->text(0), QStringLiteral("seed_cases.h5"));
  QVERIFY(!f.window->browser()
               ->tree()
               ->findItems(QStringLiteral("step 7"), Qt::MatchExactly | Qt::MatchRecursive)
               .isEmpty());
  // The selected case is current in the tree, and opening the same file again reuses it.
  QCOMPARE(f.window->browser()->tree()->currentItem()->data(0, Qt::UserRole + 1).toString(),
           kOverflowCase);
  QCOMPARE(f.context()->openFile(samplePath()), 0);
  QCOMPARE(f.context()->fileCount(), 1);
  QVERIFY(f.errors.isEmpty());
  QVERIFY(f.context()->recentFiles().contains(QFileInfo(samplePath()).absoluteFilePath()));
}

void GuiTest::browser_filter_hides_other_cases() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), {}}));
  DumpBrowserPanel* browser = f.window->browser();
  const int all = browser->casePaths(0).size();
  QCOMPARE(browser->visibleCaseCount(), all);
  browser->setFilter(QStringLiteral("FP16"));
  const int fp16 = matchingCases(*f.context(), 0, QStringLiteral("fp16"));
  QVERIFY(fp16 >= 2);  // /fp16_score_overflow, /padding_mask_fp16, ...
  QCOMPARE(browser->visibleCaseCount(), fp16);
  browser->setFilter(QStringLiteral("step_003"));
  QCOMPARE(browser->visibleCaseCount(), 4);
  browser->setFilter(QStringLiteral("no case is called like this"));
  QCOMPARE(browser->visibleCaseCount(), 0);
  browser->setFilter(QString());
  QCOMPARE(browser->visibleCaseCount(), all);
  // Selecting a case in the tree selects it in the session.
  const auto items = browser->tree()->findItems(QStringLiteral("/exploding_grad"),
                                                Qt::MatchExactly | Qt::MatchRecursive);
  QCOMPARE(items.size(), 1);
  browser->tree()->setCurrentItem(items.front());
  QCOMPARE(f.context()->casePath(), QStringLiteral("/exploding_grad"));
}

void GuiTest::drop_opens_several_files() {
  QTemporaryDir dir;
  const QString copy = dir.filePath(QStringLiteral("second_run.h5"));
  QVERIFY(QFile::copy(samplePath(), copy));
  WindowFixture f;
  DumpBrowserPanel* browser = f.window->browser();
  QMimeData mime;
  mime.setUrls({QUrl::fromLocalFile(samplePath()), QUrl::fromLocalFile(copy)});
  auto drop = [&] {  // Qt delivers a drop only after an accepted drag enter
    QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(browser, &enter);
    QDropEvent event(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(browser, &event);
    return enter.isAccepted();
  };
  QVERIFY(drop());
  // Both files are queued for the background opener; the status bar names the first and offers
  // a cancel, which drops the running open's result and the queued file.
  QCOMPARE(f.context()->fileCount(), 0);
  QVERIFY(f.window->opener()->busy());
  QCOMPARE(f.window->opener()->queued(), 1);
  QVERIFY(!f.window->cancelOpenButton()->isHidden());
  const auto* status = f.window->findChild<QLabel*>(QStringLiteral("statusText"));
  QVERIFY(status != nullptr);
  QCOMPARE(status->text(), QStringLiteral("opening %1…").arg(samplePath()));
  f.window->cancelOpenButton()->click();
  QVERIFY(!f.window->opener()->busy());
  QVERIFY(f.window->cancelOpenButton()->isHidden());
  // Background opens (a probe process, then the reader) take what the machine gives them: wait
  // as long as the other opens of this suite do, not QTRY's default 5 s.
  QTRY_COMPARE_WITH_TIMEOUT(f.window->opener()->runner()->droppedCount(), 1, 60000);
  QCOMPARE(f.context()->fileCount(), 0);
  QCOMPARE(status->text(), QStringLiteral("open cancelled"));
  // Dropped again, both open, in the order given.
  QVERIFY(drop());
  QVERIFY(f.window->opener()->busy());
  QTRY_COMPARE_WITH_TIMEOUT(f.context()->fileCount(), 2, 60000);
  QTRY_VERIFY_WITH_TIMEOUT(!f.window->opener()->busy(), 60000);
  QCOMPARE(browser->tree()->topLevelItemCount(), 2);
  QCOMPARE(browser->tree()->topLevelItem(1)->text(0), QStringLiteral("second_run.h5"));
  QCOMPARE(browser->casePaths(1), browser->casePaths(0));
  QCOMPARE(browser->visibleCaseCount(), 2 * browser->casePaths(0).size());
  // A case of the second file is selected like any other; recent files list both.
  QVERIFY(f.context()->selectCase(1, QStringLiteral("/exploding_grad")));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return r.file_path.find("second_run.h5") != std::string::npos;
  }));
  QVERIFY(f.window->heatmaps()->view(HeadView::s)->stamp().startsWith("second_run.h5"));
  QCOMPARE(f.context()->recentFiles().size(), 2);
  QVERIFY(f.errors.isEmpty());
}

void GuiTest::fp16_unfused_overlay_head3_not_head0() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  SessionContext* ctx = f.context();
  ctx->setPrecision(Precision::f16);
  ctx->setMode(Mode::unfused);
  ctx->setHead(3);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return isSelection(r, 3, Precision::f16, Mode::unfused);
  }));
  HeatmapView* s = f.window->heatmaps()->view(HeadView::s);
  const CellCounts c3 = s->overlayCounts();
  QVERIFY2(c3.pos_inf + c3.nan > 0, "QK^T overflows fp16 in head 3");
  QVERIFY(s->overlayCells(CellClass::pos_inf) + s->overlayCells(CellClass::nan) > 0);
  QVERIFY(f.window->heatmaps()->view(HeadView::p)->overlayCounts().nan > 0);
  QVERIFY(s->stamp().contains(QStringLiteral("fp16 unfused")));
  QVERIFY(s->stamp().contains(QStringLiteral("h3")));

  ctx->setHead(0);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return isSelection(r, 0, Precision::f16, Mode::unfused);
  }));
  QCOMPARE(s->overlayCounts().nonfinite(), int64_t{0});
  QCOMPARE(s->overlayCells(CellClass::pos_inf), int64_t{0});

  // Fused fp16 keeps the scores in fp32: head 3 is finite there.
  ctx->setHead(3);
  ctx->setMode(Mode::fused);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return isSelection(r, 3, Precision::f16, Mode::fused);
  }));
  QCOMPARE(s->overlayCounts().nonfinite(), int64_t{0});
  QVERIFY(f.errors.isEmpty());
}

void GuiTest::scale_entry_recomputes_with_new_scale() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.scale == 0.125; }));
  const auto before = f.context()->result();
  QSignalSpy finished(f.window->worker(), &ComputeWorker::finished);
  QLineEdit* edit = f.window->controls()->scaleEdit();
  QCOMPARE(edit->text(), QStringLiteral("0.125"));
  edit->setFocus();
  edit->selectAll();
  QTest::keyClicks(edit, QStringLiteral("0.5"));
  QTest::keyClick(edit, Qt::Key_Return);
  QTRY_VERIFY_WITH_TIMEOUT(finished.count() >= 1, 30000);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.scale == 0.5; }));
  const auto after = f.context()->result();
  QVERIFY(after != before);
  // Fused fp16 scores are fp32 products scaled once: x4 scale is exactly x4 scores.
  int compared = 0;
  for (size_t e = 0; e < after->s->raw.size(); ++e) {
    const float a = before->s->raw[e], b = after->s->raw[e];
    if (std::isfinite(a) && a != 0) {
      QCOMPARE(b, 4 * a);
      ++compared;
    }
  }
  QVERIFY(compared > 1000);
  QVERIFY(f.window->heatmaps()->view(HeadView::s)->stamp().contains("scale 0.5"));
}

void GuiTest::scale_slider_and_reset() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  ControlsPanel* controls = f.window->controls();
  QSlider* slider = controls->scaleSlider();
  QCOMPARE(slider->value(), (slider->minimum() + slider->maximum()) / 2);
  slider->setValue(slider->maximum());
  QVERIFY(std::fabs(*f.context()->choice().scale / 125.0 - 1) < 1e-12);  // 1000 x 0.125
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.scale > 124; }));
  QCOMPARE(controls->scaleEdit()->text(), QStringLiteral("125"));
  f.context()->setScale(std::nullopt);  // what "reset" does
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) { return r.scale == 0.125; }));
  QCOMPARE(slider->value(), (slider->minimum() + slider->maximum()) / 2);
  QCOMPARE(controls->scaleEdit()->text(), QStringLiteral("0.125"));
}

void GuiTest::stale_results_are_dropped() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  ComputeWorker* worker = f.window->worker();
  SessionContext* ctx = f.context();
  QSignalSpy finished(worker, &ComputeWorker::finished);
  QSignalSpy dropped(worker, &ComputeWorker::dropped);
  QSignalSpy applied(ctx, &SessionContext::resultChanged);
  HeadRequest first = *ctx->currentRequest();
  first.run.scale = 0.5;
  HeadRequest second = first;
  second.run.scale = 0.25;
  const quint64 idFirst = worker->submit(ctx->cases(), ctx->casePath(), first);
  const quint64 idSecond = worker->submit(ctx->cases(), ctx->casePath(), second);
  QVERIFY(idSecond > idFirst);
  QCOMPARE(worker->latestId(), idSecond);
  QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
  QCOMPARE(finished.at(0).at(0).toULongLong(), idSecond);
  QTRY_COMPARE_WITH_TIMEOUT(dropped.count(), 1, 30000);
  QCOMPARE(dropped.at(0).at(0).toULongLong(), idFirst);
  QTest::qWait(300);
  QCOMPARE(finished.count(), 1);
  QCOMPARE(applied.count(), 1);
  QCOMPARE(ctx->result()->scale, 0.25);

  // Cancel: the running job's result is dropped and nothing is applied.
  const quint64 idCancelled = worker->submit(ctx->cases(), ctx->casePath(), first);
  worker->cancel();
  QVERIFY(!worker->busy());
  QTRY_VERIFY_WITH_TIMEOUT(dropped.count() == 2, 30000);
  QCOMPARE(dropped.at(1).at(0).toULongLong(), idCancelled);
  QCOMPARE(applied.count(), 1);
}

// A background runner's thread runs at nice +10, and so do the threads a job starts (the
// kernels' workers); a normal runner's stay at the caller's nice value.
void GuiTest::background_runner_lowers_its_thread_and_the_threads_it_starts() {
  const auto niceOf = [](TaskPriority priority) {
    TaskRunner runner(QStringLiteral("attnscope-nice-test"), priority);
    std::optional<std::pair<int, int>> seen;  // (the job's thread, a thread it starts)
    runner.submit<std::pair<int, int>>(
        [](const TaskControl&, QString*) {
          const auto own = [] { return getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())); };
          int started = 0;
          std::thread([&] { started = own(); }).join();
          return std::make_shared<const std::pair<int, int>>(own(), started);
        },
        [&](std::shared_ptr<const std::pair<int, int>> r) { seen = *r; });
    return waitUntil([&] { return seen.has_value(); }) ? *seen : std::pair<int, int>{-99, -99};
  };
  const int base = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  const int lowered = std::min(base + 10, 19);
  QCOMPARE(niceOf(TaskPriority::background), std::make_pair(lowered, lowered));
  QCOMPARE(niceOf(TaskPriority::normal), std::make_pair(base, base));
}

void GuiTest::non_hdf5_file_shows_error_and_window_survives() {
  QTemporaryDir dir;
  const QString bogus = dir.filePath(QStringLiteral("not_a_dump.h5"));
  {
    QFile file(bogus);
    QVERIFY(file.open(QIODevice::WriteOnly));
    file.write("this is not an HDF5 file\n");
  }
  WindowFixture f(/*keepDialogs=*/true);
  QVERIFY(!f.window->openTarget({bogus, {}}));
  QMessageBox* box = nullptr;
  QTRY_VERIFY((box = f.window->findChild<QMessageBox*>(QStringLiteral("attnscopeError"))) &&
              box->isVisible());
  QVERIFY2(box->text().contains(QStringLiteral("not_a_dump.h5")), qPrintable(box->text()));
  QVERIFY(box->informativeText().startsWith(QStringLiteral("Hint:")));
  box->close();
  QTRY_VERIFY(f.window->findChild<QMessageBox*>(QStringLiteral("attnscopeError")) == nullptr);
  QCOMPARE(f.context()->fileCount(), 0);
  // A missing file is an error too, and the window still opens a good file afterwards.
  QVERIFY(!f.window->openTarget({dir.filePath(QStringLiteral("missing.h5")), {}}));
  QTRY_VERIFY(f.window->findChild<QMessageBox*>(QStringLiteral("attnscopeError")) != nullptr);
  f.window->findChild<QMessageBox*>(QStringLiteral("attnscopeError"))->close();
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  QVERIFY(f.window->isVisible());
}

void GuiTest::unknown_case_reports_error() {
  WindowFixture f;
  QVERIFY(!f.window->openTarget({samplePath(), QStringLiteral("/no/such/case")}));
  QCOMPARE(f.errors.size(), 1);
  QVERIFY(f.errors.front().contains(QStringLiteral("/no/such/case")));
  QCOMPARE(f.context()->fileCount(), 1);  // the file itself opened fine
  QVERIFY(f.context()->caseInfo() == nullptr);
}

void GuiTest::window_menu_lists_docks_and_resets_layout() {
  WindowFixture f;
  QMenu* menu = f.window->menuBar()->findChild<QMenu*>(QStringLiteral("windowMenu"));
  QVERIFY(menu != nullptr);
  const QList<QDockWidget*> docks = f.window->docks();
  QCOMPARE(docks.size(), 5);  // browser, controls, inspector, findings, annotations
  for (QDockWidget* dock : docks) {
    QVERIFY(menu->actions().contains(dock->toggleViewAction()));
    QVERIFY(dock->isVisible());
  }
  // The secondary views are pages, one shortcut each: Ctrl+5 brings the stepper to the front.
  QTabWidget* pages = f.window->pages();
  QCOMPARE(pages->count(), 7);  // heatmaps, origin, overview, row plots, stepper, scale sweep,
                                // health
  QCOMPARE(pages->tabText(4), QStringLiteral("Stepper"));
  f.window->show();
  QVERIFY(QTest::qWaitForWindowExposed(f.window.get()));
  QTest::keyClick(f.window.get(), Qt::Key_5, Qt::ControlModifier);
  QVERIFY(f.window->stepperPanel()->isVisible());
  QVERIFY(!f.window->heatmaps()->isVisible());
  docks[2]->toggleViewAction()->trigger();
  QVERIFY(!docks[2]->isVisible());
  docks[2]->toggleViewAction()->trigger();
  QVERIFY(docks[2]->isVisible());
  // Reset brings back closed and floated docks, the heatmaps page and sizes fit for the window.
  docks[0]->close();
  docks[3]->setFloating(true);
  f.window->resetLayout();
  for (QDockWidget* dock : docks) QVERIFY(dock->isVisible() && !dock->isFloating());
  QCOMPARE(pages->currentIndex(), 0);
  // The layout is saved on close and restored by the next window.
  docks[1]->close();
  f.window->close();
  WindowFixture g;
  QVERIFY(!g.window->docks()[1]->isVisible());
  g.window->resetLayout();
  QVERIFY(g.window->docks()[1]->isVisible());
  g.window->close();  // saves the default layout again for later windows
}

void GuiTest::command_line_opens_case_with_settings() {
  WindowFixture f;
  const AppOptions options = parseCommandLine(
      {QStringLiteral("attnscope"), "--precision", "fp16", "--mode", "unfused", "--head", "3",
       "--matrix", "P", samplePath() + QStringLiteral("::fp16_score_overflow")});
  QVERIFY(options.error.isEmpty());
  QVERIFY(f.window->applyOptions(options));
  QCOMPARE(f.context()->casePath(), kOverflowCase);
  QVERIFY(waitForResult(*f.window, [](const HeadResult& r) {
    return isSelection(r, 3, Precision::f16, Mode::unfused);
  }));
  QCOMPARE(f.window->heatmaps()->currentView()->name(), QStringLiteral("P"));
  QVERIFY(f.window->heatmaps()->view(HeadView::s)->overlayCounts().nonfinite() > 0);
}

void GuiTest::title_and_status_bar_say_what_is_shown_and_done() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QCOMPARE(f.window->windowTitle(),
           QStringLiteral("/fp16_score_overflow — seed_cases.h5 — attnscope"));
  f.context()->selectCase(0, kPaddingCase);
  QCOMPARE(f.window->windowTitle(),
           QStringLiteral("/padding_mask_fp16 — seed_cases.h5 — attnscope"));
  // Nobody is stepping: no stepper message covers the status bar.
  QCOMPARE(f.window->statusBar()->currentMessage(), QString());
  // When the scan ends the status bar says so, with the counts the browser badges show.
  const auto* status = f.window->findChild<QLabel*>(QStringLiteral("statusText"));
  QVERIFY(waitUntil([&] {
    const auto scan = f.window->scans()->scan(samplePath());
    return scan && scan->complete() && !f.window->scans()->busy() &&
           status->text().startsWith(QStringLiteral("scan done: 37 cases, "));
  }));
  int errors = 0;
  for (const ScannedCase& c : f.window->scans()->scan(samplePath())->cases) {
    errors += c.verdict.worst == Severity::error;
  }
  QVERIFY2(status->text().contains(QStringLiteral("%1 with errors").arg(errors)),
           qPrintable(status->text()));
}

void GuiTest::wheel_never_changes_an_unfocused_control() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  auto* precision = f.window->findChild<QComboBox*>(QStringLiteral("precisionBox"));
  QVERIFY(precision);
  const auto wheel = [&] {
    const QPoint at = precision->rect().center();
    QWheelEvent event(at, precision->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton,
                      Qt::NoModifier, Qt::NoScrollPhase, false);
    QApplication::sendEvent(precision, &event);
  };
  const int before = precision->currentIndex();
  precision->clearFocus();
  wheel();
  QCOMPARE(precision->currentIndex(), before);  // scrolling past it changes nothing
  precision->setFocus();
  QVERIFY(waitUntil([&] { return precision->hasFocus(); }, 5000) || !f.window->isActiveWindow());
  if (precision->hasFocus()) {
    wheel();
    QVERIFY(precision->currentIndex() != before);  // focused, the wheel works as usual
  }
}

}  // namespace attnscope::test
