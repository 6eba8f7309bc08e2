// The window on a 1366×768 laptop screen: minimum size with the default layout, no growth by
// itself after case changes, tab switches and hovering (DESIGN §6, issue 15 item 1).
#include <QDockWidget>
#include <QScrollArea>
#include <QScrollBar>
#include <QTabWidget>
#include <QtTest>

#include "app/gui/SessionContext.h"
#include "app/panels/ControlsPanel.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/GuiTest.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {

void GuiTest::window_fits_1366x768_screen() {
  WindowFixture f;
  f.window->resize(1366, 740);
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  QString why;
  QVERIFY2(fitsLaptop(*f.window, &why), qPrintable(why));

  // What grew the window before: long inspector lines over a pooled cell, another case, other
  // tabs, re-docking a panel.
  QVERIFY(f.context()->selectCase(0, QStringLiteral("/healthy_b2_h8_s1024")));
  QVERIFY(waitForResult(*f.window,
                        [](const HeadResult& r) { return r.case_path == "/healthy_b2_h8_s1024"; }));
  HeatmapPanel* heatmaps = f.window->heatmaps();
  for (HeadView tab : {HeadView::p, HeadView::dv_err, HeadView::s}) {
    heatmaps->tabs()->setCurrentWidget(heatmaps->view(tab));
    QTest::qWait(50);
  }
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  heatmaps->currentView()->hoverCell(700, 3);
  QDockWidget* findings = f.window->findChild<QDockWidget*>(QStringLiteral("findingsDock"));
  findings->setFloating(true);
  QTest::qWait(50);
  findings->setFloating(false);
  QTest::qWait(50);
  QVERIFY2(fitsLaptop(*f.window, &why), qPrintable(why));
  QVERIFY2(
      f.window->width() <= 1366 && f.window->height() <= 740,
      qPrintable(
          QStringLiteral("window grew to %1x%2").arg(f.window->width()).arg(f.window->height())));
}

void GuiTest::laptop_layout_gives_the_heatmap_half_the_window() {
  WindowFixture f;
  f.window->resize(1366, 728);  // a 1366x768 screen less the title bar
  f.window->show();
  QVERIFY(QTest::qWaitForWindowExposed(f.window.get()));
  f.window->resetLayout();
  QVERIFY(f.window->openTarget({samplePath(), QStringLiteral("/healthy_b2_h8_s1024")}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  QTest::qWait(100);
  const auto area = [](const QWidget* w) { return double(w->width()) * w->height(); };
  const double share = area(f.window->heatmaps()) / area(f.window.get());
  QVERIFY2(share >= 0.5, qPrintable(QStringLiteral("heatmap panel %1x%2 is %3 of the window")
                                        .arg(f.window->heatmaps()->width())
                                        .arg(f.window->heatmaps()->height())
                                        .arg(share)));
  // The run controls fit their dock: no scroll bar, every control inside the visible part.
  auto* scroll = qobject_cast<QScrollArea*>(f.window->controls()->parentWidget()->parentWidget());
  QVERIFY(scroll != nullptr);
  QVERIFY(!scroll->verticalScrollBar()->isVisible() && !scroll->horizontalScrollBar()->isVisible());
  for (QWidget* control : {static_cast<QWidget*>(f.window->controls()->headBox()),
                           static_cast<QWidget*>(f.window->controls()->clipScopeBox()),
                           static_cast<QWidget*>(f.window->controls()->backendBox())}) {
    const QRect shown(control->mapTo(scroll->viewport(), QPoint(0, 0)), control->size());
    QVERIFY2(scroll->viewport()->rect().contains(shown), qPrintable(control->objectName()));
  }
  // A case whose default scale has many digits (D = 32: 0.176776695297) still fits the column.
  QVERIFY(f.context()->selectCase(0, QStringLiteral("/recorded_mismatch")));
  QVERIFY(waitForResult(*f.window,
                        [](const HeadResult& r) { return r.case_path == "/recorded_mismatch"; }));
  QTest::qWait(50);
  QVERIFY(!scroll->verticalScrollBar()->isVisible() && !scroll->horizontalScrollBar()->isVisible());
  QVERIFY(f.window->controls()->scaleEdit()->text().startsWith(QStringLiteral("0.17677")));
  QCOMPARE(f.window->controls()->scaleEdit()->cursorPosition(), 0);
  // Each secondary view is a full-size page, never a sliver.
  QTabWidget* pages = f.window->pages();
  for (int i = 1; i < pages->count(); ++i) {
    pages->setCurrentIndex(i);
    QTest::qWait(20);
    QVERIFY2(area(pages->currentWidget()) >= 0.5 * area(f.window.get()),
             qPrintable(pages->tabText(i)));
  }
  // An accidental shrink is not kept: the next window opens with the default layout.
  pages->setCurrentIndex(0);
  QDockWidget* controlsDock = f.window->docks()[1];
  f.window->resizeDocks({controlsDock}, {40}, Qt::Vertical);
  QTest::qWait(50);
  f.window->close();
  WindowFixture g;
  g.window->resize(1366, 728);
  g.window->show();
  QVERIFY(QTest::qWaitForWindowExposed(g.window.get()));
  QVERIFY2(g.window->docks()[1]->height() > 150,
           qPrintable(QString::number(g.window->docks()[1]->height())));
}

}  // namespace attnscope::test
