// The fixture of the interaction and session suites: the bundled sample (and copies of it in
// temporary folders, where sidecar files may be written), and a shown, active MainWindow whose
// error dialogs are collected, with waits for its results.
#pragma once

#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <functional>
#include <memory>

#include "app/gui/MainWindow.h"
#include "core/view/head_compute.h"
#include "tests/gui/TestSupport.h"

namespace attnscope::test {

// waitUntil, then one more 50 ms turn of the event loop so that the views take what was
// delivered in the turn that made `done` hold.
bool waitShown(const std::function<bool()>& done, int timeoutMs = 60000);

// A shown, active MainWindow whose error dialogs are collected in `errors`.
struct ShownWindow {
  std::unique_ptr<MainWindow> window;
  QStringList errors;
  ShownWindow();
  SessionContext* context() const;
  // Waits (up to 2 minutes, waitShown) until a result of `casePath` at `head` is shown with no
  // compute pending and `ok` (when given) holds for it.
  bool waitForHead(const QString& casePath, int64_t head,
                   const std::function<bool(const HeadResult&)>& ok = {});
};

}  // namespace attnscope::test
