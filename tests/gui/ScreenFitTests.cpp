// The window on a 1366×768 laptop screen: minimum size with the default layout, no growth by
// itself after case changes, tab switches and hovering (DESIGN §6, issue 15 item 1).
#include <QDockWidget>
#include <QTabWidget>
#include <QtTest>

#include "app/gui/SessionContext.h"
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

}  // namespace attnscope::test
