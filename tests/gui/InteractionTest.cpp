// Entry point and fixtures of the interaction test suite: isolated settings, a copy of the
// sample for sidecar files, a shown window that collects errors, and waiting for results.
#include "tests/gui/InteractionTest.h"

#include <QApplication>
#include <QSettings>
#include <QStandardPaths>
#include <QtTest>

#include "app/gui/ComputeWorker.h"
#include "app/gui/SessionContext.h"

namespace attnscope::test {

QString samplePath() {
  return QStringLiteral(ATTNSCOPE_SAMPLE);
}

SampleCopy::SampleCopy() : path(dir.filePath(QStringLiteral("seed_cases.h5"))) {
  QVERIFY(QFile::copy(samplePath(), path));
}

ShownWindow::ShownWindow() : window(std::make_unique<MainWindow>()) {
  window->setErrorHandler([this](const QString& title, const QString& message, const QString&) {
    errors << title + QStringLiteral(": ") + message;
  });
  window->resize(1400, 900);
  window->show();
  window->activateWindow();
  QVERIFY(QTest::qWaitForWindowActive(window.get()));
}

SessionContext* ShownWindow::context() const {
  return window->context();
}

bool ShownWindow::waitForHead(const QString& casePath, int64_t head,
                              const std::function<bool(const HeadResult&)>& ok) {
  return waitUntil(
      [&] {
        const auto r = context()->result();
        return r && !window->worker()->busy() && r->request.head == head &&
               QString::fromStdString(r->case_path) == casePath && (!ok || ok(*r));
      },
      120000);
}

bool waitUntil(const std::function<bool()>& done, int timeoutMs) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < timeoutMs) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    if (done()) {
      QTest::qWait(50);  // the views take the result in this turn
      return true;
    }
    QTest::qWait(10);
  }
  return false;
}

void InteractionTest::initTestCase() {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("attnscope-tests"));
  QCoreApplication::setApplicationName(QStringLiteral("attnscope-interaction-tests"));
  QVERIFY(settingsDir_.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir_.path());
  QVERIFY2(QFile::exists(samplePath()), qPrintable(samplePath()));
}

}  // namespace attnscope::test

QTEST_MAIN(attnscope::test::InteractionTest)
