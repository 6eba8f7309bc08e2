// Debugger conventions on the real window (issue 15 item 8): the Help menu's shortcut sheet and
// About box, Home and double-click showing the whole matrix, wheel zoom and drags kept within
// the matrix, and window shortcuts that work while a text field has the focus.
#include <qcustomplot.h>
#include <QAction>
#include <QApplication>
#include <QDialog>
#include <QKeyEvent>
#include <QLineEdit>
#include <QMenuBar>
#include <QSignalSpy>
#include <QTimer>
#include <QtTest>

#include "app/gui/HelpMenu.h"
#include "app/gui/WindowShortcuts.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "tests/gui/GuiTest.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {

void GuiTest::help_menu_lists_shortcuts_and_versions() {
  WindowFixture f;
  const QList<QAction*> menus = f.window->menuBar()->actions();
  QCOMPARE(menus.last()->menu()->title(), QStringLiteral("&Help"));
  const QString sheet = f.window->help()->shortcutSheet();
  for (const char* line : {"F8\tNavigate: Next finding", "Shift+F8\tNavigate: Previous finding",
                           "Home\tNavigate: Whole matrix", "Ctrl+E\tFile: Export view…",
                           "F1\tHelp: Keyboard shortcuts…", "Ctrl+G\tNavigate: Go to cell…"}) {
    QVERIFY2(sheet.contains(QString::fromUtf8(line)), qPrintable(sheet));
  }
  const QString about = f.window->help()->aboutText();
  for (const char* part : {"attnscope 0.1.0", "Qt 6.", "QCustomPlot 2.1", "HDF5 1.10."}) {
    QVERIFY2(about.contains(QLatin1String(part)), qPrintable(about));
  }
  // F1 opens the sheet.
  QTest::keyClick(f.window.get(), Qt::Key_F1);
  auto* dialog = f.window->findChild<QDialog*>(QStringLiteral("shortcutSheet"));
  QVERIFY(dialog && dialog->isVisible());
  dialog->close();
}

void GuiTest::home_and_double_click_show_the_whole_matrix() {
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  QVERIFY(waitForResult(*f.window, [](const HeadResult&) { return true; }));
  HeatmapView* s = f.window->heatmaps()->view(HeadView::s);
  f.window->context()->showView(HeadView::s);
  const MatrixWindow whole{0, 128, 0, 128};
  s->zoomTo({10, 42, 8, 40});
  QCOMPARE(s->visibleWindow(), (MatrixWindow{10, 42, 8, 40}));
  QTest::keyClick(f.window.get(), Qt::Key_Home);
  QCOMPARE(s->visibleWindow(), whole);
  s->zoomTo({10, 42, 8, 40});
  const QPoint centre = s->plot()->axisRect()->rect().center();
  QTest::mouseDClick(s->plot(), Qt::LeftButton, Qt::NoModifier, centre);
  QCOMPARE(s->visibleWindow(), whole);

  // Zooming out past the matrix shows the matrix; a drag past an edge stops at it.
  s->plot()->xAxis->setRange(-1000, 3000);
  QCOMPARE(s->plot()->xAxis->range(), QCPRange(-0.5, 127.5));
  s->plot()->yAxis->setRange(100, 140);
  QCOMPARE(s->plot()->yAxis->range(), QCPRange(87.5, 127.5));
  s->plot()->yAxis->setRange(-30, 10);
  QCOMPARE(s->plot()->yAxis->range(), QCPRange(-0.5, 39.5));
}

void GuiTest::window_shortcuts_work_while_a_text_field_has_focus() {
  // The rule itself: Ctrl+E reaches the window, editing keys stay with the field.
  const auto wins = [](int key, Qt::KeyboardModifiers mods) {
    const QKeyEvent e(QEvent::ShortcutOverride, key, mods);
    return windowShortcutWins(e);
  };
  QVERIFY(wins(Qt::Key_E, Qt::ControlModifier));
  QVERIFY(wins(Qt::Key_G, Qt::ControlModifier));
  QVERIFY(!wins(Qt::Key_C, Qt::ControlModifier));
  QVERIFY(!wins(Qt::Key_V, Qt::ControlModifier));
  QVERIFY(!wins(Qt::Key_A, Qt::ControlModifier));
  QVERIFY(!wins(Qt::Key_Z, Qt::ControlModifier));
  QVERIFY(!wins(Qt::Key_Left, Qt::ControlModifier));
  QVERIFY(!wins(Qt::Key_E, Qt::NoModifier));

  // A bare text field claims Ctrl+E where the platform binds it to "end of line" (xcb does;
  // gui.x11.window_shortcuts_work_while_a_text_field_has_focus runs this under Xvfb).
  const bool endOfLineKey = QKeySequence::keyBindings(QKeySequence::MoveToEndOfLine)
                                .contains(QKeySequence(Qt::CTRL | Qt::Key_E));
  if (QGuiApplication::platformName() == QStringLiteral("xcb")) QVERIFY(endOfLineKey);
  {
    QLineEdit bare;
    QKeyEvent override(QEvent::ShortcutOverride, Qt::Key_E, Qt::ControlModifier);
    override.ignore();
    QCoreApplication::sendEvent(&bare, &override);
    QCOMPARE(override.isAccepted(), endOfLineKey);
  }

  // In the window: Ctrl+E typed in the annotation label field opens the export dialog.
  WindowFixture f;
  QVERIFY(f.window->openTarget({samplePath(), kOverflowCase}));
  auto* label = f.window->findChild<QLineEdit*>(QStringLiteral("annotationLabel"));
  auto* exportAction = f.window->findChild<QAction*>(QStringLiteral("exportAction"));
  QVERIFY(label && exportAction);
  QSignalSpy triggered(exportAction, &QAction::triggered);
  bool dialogShown = false;
  QTimer::singleShot(300, [&dialogShown] {  // the file dialog is modal: close it
    if (QWidget* modal = QApplication::activeModalWidget()) {
      dialogShown = true;
      modal->close();
    }
  });
  f.window->activateWindow();  // window shortcuts need the active window (Xvfb has no WM)
  QVERIFY(QTest::qWaitForWindowActive(f.window.get()));
  label->setFocus();
  QCOMPARE(QApplication::focusWidget(), label);
  QTest::keyClick(label, Qt::Key_E, Qt::ControlModifier);
  QCOMPARE(triggered.count(), 1);
  QVERIFY(dialogShown);
}

}  // namespace attnscope::test
