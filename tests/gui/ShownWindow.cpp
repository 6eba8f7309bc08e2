// The shown-window fixture of the interaction and session suites (see ShownWindow.h).
#include "tests/gui/ShownWindow.h"

#include <QtTest>

#include "app/gui/ComputeWorker.h"
#include "app/gui/SessionContext.h"

namespace attnscope::test {

bool waitShown(const std::function<bool()>& done, int timeoutMs) {
  if (!waitUntil(done, timeoutMs)) return false;
  QTest::qWait(50);
  return true;
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
  return waitShown(
      [&] {
        const auto r = context()->result();
        return r && !window->worker()->busy() && r->request.head == head &&
               QString::fromStdString(r->case_path) == casePath && (!ok || ok(*r));
      },
      120000);
}

}  // namespace attnscope::test
