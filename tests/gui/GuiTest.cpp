// Entry point and shared fixtures of the GUI test suite: isolated settings, a shown window
// that collects errors, and waiting for background results.
#include "tests/gui/GuiTest.h"

#include <QApplication>
#include <QSettings>
#include <QStandardPaths>
#include <QtTest>

#include "app/gui/ComputeWorker.h"
#include "app/gui/SessionContext.h"

namespace attnscope::test {

WindowFixture::WindowFixture(bool keepDialogs) : window(std::make_unique<MainWindow>()) {
  if (!keepDialogs) {
    window->setErrorHandler([this](const QString& title, const QString& message, const QString&) {
      errors << title + QStringLiteral(": ") + message;
    });
  }
  window->resize(1400, 900);
  window->show();
  QVERIFY(QTest::qWaitForWindowExposed(window.get()));
}

SessionContext* WindowFixture::context() const {
  return window->context();
}

bool waitForResult(MainWindow& window, const std::function<bool(const HeadResult&)>& ok,
                   int timeoutMs) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < timeoutMs) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    const auto result = window.context()->result();
    if (result && !window.worker()->busy() && ok(*result)) return true;
    QTest::qWait(10);
  }
  return false;
}

void GuiTest::initTestCase() {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("attnscope-tests"));
  QCoreApplication::setApplicationName(QStringLiteral("attnscope-gui-tests"));
  QVERIFY(settingsDir_.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir_.path());
  QVERIFY2(QFile::exists(samplePath()), qPrintable(samplePath()));
}

}  // namespace attnscope::test

QTEST_MAIN(attnscope::test::GuiTest)
