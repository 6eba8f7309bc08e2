// The window on a 1366×768 laptop screen: minimum size with the default layout, no growth by
// itself after case changes, tab switches and hovering (DESIGN §6, issue 15 item 1).
#include <QDockWidget>
#include <QMainWindow>
#include <QStatusBar>
#include <QTabWidget>
#include <QtTest>

#include "app/gui/SessionContext.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/GuiTest.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {
namespace {

// The largest minimum size a window may ask for: a 1366×768 screen less a taskbar and title.
constexpr int kMaxMinWidth = 1024;
constexpr int kMaxMinHeight = 700;

// What the main window's layout adds up: each dock, the central widget, tool and status bars
// and the largest child of each ("name w×h (largest child: name w×h)"), widest first.
QString roomAskedFor(const QMainWindow& window) {
  auto minOf = [](const QWidget* w) { return w->minimumSizeHint().expandedTo(w->minimumSize()); };
  auto describe = [&minOf](const QWidget* w) {
    const QSize s = minOf(w);
    const QString name = w->objectName().isEmpty()
                             ? QString::fromLatin1(w->metaObject()->className())
                             : w->objectName();
    return QStringLiteral("%1 %2x%3").arg(name).arg(s.width()).arg(s.height());
  };
  QList<QWidget*> parts;
  for (QDockWidget* dock : window.findChildren<QDockWidget*>()) parts << dock;
  for (QWidget* w :
       {window.centralWidget(), window.menuWidget(), static_cast<QWidget*>(window.statusBar())}) {
    if (w) parts << w;
  }
  QStringList lines;
  for (const QWidget* part : parts) {
    const QWidget* largest = nullptr;
    for (const QWidget* child : part->findChildren<QWidget*>()) {
      const QSize s = minOf(child);
      if (!largest || s.width() * s.height() > minOf(largest).width() * minOf(largest).height()) {
        largest = child;
      }
    }
    lines << describe(part) + (largest
                                   ? QStringLiteral(" (largest child: %1)").arg(describe(largest))
                                   : QString());
  }
  return lines.join(QStringLiteral("; "));
}

// Fails with the widgets to blame when the window's minimum exceeds the laptop limit.
bool fitsLaptop(const QMainWindow& window, QString* why) {
  const QSize min = window.minimumSizeHint().expandedTo(window.minimumSize());
  if (min.width() <= kMaxMinWidth && min.height() <= kMaxMinHeight) return true;
  *why = QStringLiteral("minimum %1x%2; largest: %3")
             .arg(min.width())
             .arg(min.height())
             .arg(roomAskedFor(window));
  return false;
}

}  // namespace

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
