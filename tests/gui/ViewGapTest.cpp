// Entry point and fixtures of the session / overview suite: isolated settings and per-user data
// folder (XDG_DATA_HOME), sample copies, a shown window that collects errors, waiting.
#include "tests/gui/ViewGapTest.h"

#include <QSettings>
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

bool ShownWindow::waitForHead(const QString& casePath, int64_t head) {
  return waitUntil(
      [&] {
        const auto r = context()->result();
        return r && !window->worker()->busy() && r->request.head == head &&
               QString::fromStdString(r->case_path) == casePath;
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

std::vector<double> tensorValues(int64_t n, int seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = ((i * 37 + seed * 11) % 101 - 50) / 16.0;
  return v;
}

void ViewGapTest::initTestCase() {
  QCoreApplication::setOrganizationName(QStringLiteral("attnscope-tests"));
  QCoreApplication::setApplicationName(QStringLiteral("attnscope-session-tests"));
  QVERIFY(settingsDir_.isValid() && dataHome_.isValid());
  // The per-user fallback of the sidecar goes to a fresh folder; view state is saved for every
  // dump (the default this suite pins).
  qputenv("XDG_DATA_HOME", dataHome_.path().toUtf8());
  qunsetenv("ATTNSCOPE_SESSION_AUTOSAVE");
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir_.path());
  QVERIFY2(QFile::exists(samplePath()), qPrintable(samplePath()));
}

}  // namespace attnscope::test

QTEST_MAIN(attnscope::test::ViewGapTest)
