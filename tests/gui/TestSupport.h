// Helpers shared by the GUI test suites: the bundled sample, waiting on the event loop for a
// condition, the laptop-screen check, and user annotations built from their parts.
#pragma once

#include <QJsonObject>
#include <QPointF>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>
#include <functional>

#include "app/plot/Annotation.h"

class QMainWindow;

namespace attnscope::test {

// The bundled sample dump, copied once per test process into a private folder: a sidecar next
// to the real one (running the app on it writes one) cannot change what a test sees, and no
// test writes one there.
QString samplePath();

// Another copy of the sample in a folder of its own, for a test that writes its sidecar.
struct SampleCopy {
  QTemporaryDir dir;
  QString path;
  SampleCopy();
};

// Runs the event loop (queued events first, then 10 ms waits) until `done` holds; true as soon
// as it does, else its value after timeoutMs.
bool waitUntil(const std::function<bool()>& done, int timeoutMs = 90000);

// Whether the window's minimum size (default layout) fits a 1366x768 laptop screen less a
// taskbar and title, at most 1024x700; else false with the widgets to blame in `why`.
bool fitsLaptop(const QMainWindow& window, QString* why);

// `attnscope-cli scan DUMP --json ARGS` of this build (the suite's ATTNSCOPE_CLI): its document,
// empty when it did not run or printed no JSON.
QJsonObject cliScanJson(const QString& dump, const QStringList& args = {});

// A user annotation of `view` at batch 0, head 3 (the head the sample's overflow case shows).
Annotation makeAnnotation(AnnotationKind kind, const QString& view, QPointF from, QPointF to,
                          const QString& text);

}  // namespace attnscope::test
