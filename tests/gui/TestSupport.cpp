// Waiting on the event loop, the laptop-screen check and annotation building for the GUI tests
// (see TestSupport.h).
#include "tests/gui/TestSupport.h"

#include <QCoreApplication>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QMainWindow>
#include <QProcess>
#include <QStatusBar>
#include <QtTest>

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

}  // namespace

QString samplePath() {
  static QTemporaryDir dir;
  static const QString copy = [] {
    const QString path = dir.filePath(QStringLiteral("seed_cases.h5"));
    if (!dir.isValid() || !QFile::copy(QStringLiteral(ATTNSCOPE_SAMPLE), path)) {
      qFatal("cannot copy the sample %s into %s", ATTNSCOPE_SAMPLE, qPrintable(dir.path()));
    }
    return path;
  }();
  return copy;
}

SampleCopy::SampleCopy() : path(dir.filePath(QStringLiteral("seed_cases.h5"))) {
  QVERIFY(QFile::copy(samplePath(), path));
}

bool waitUntil(const std::function<bool()>& done, int timeoutMs) {
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < timeoutMs) {
    // Queued work (a compute scheduled by a zero timer, a deferred delete) runs before the check,
    // so a state that is about to change is not taken for the awaited one.
    QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
    if (done()) return true;
    QTest::qWait(10);
  }
  return done();
}

Annotation makeAnnotation(AnnotationKind kind, const QString& view, QPointF from, QPointF to,
                          const QString& text) {
  Annotation a;
  a.kind = kind;
  a.view = view;
  a.head = 3;
  a.from = from;
  a.to = to;
  a.text = text;
  return a;
}

bool fitsLaptop(const QMainWindow& window, QString* why) {
  const QSize min = window.minimumSizeHint().expandedTo(window.minimumSize());
  if (min.width() <= kMaxMinWidth && min.height() <= kMaxMinHeight) return true;
  *why = QStringLiteral("minimum %1x%2; largest: %3")
             .arg(min.width())
             .arg(min.height())
             .arg(roomAskedFor(window));
  return false;
}

QJsonObject cliScanJson(const QString& dump, const QStringList& args) {
  QProcess cli;
  cli.start(QStringLiteral(ATTNSCOPE_CLI),
            QStringList{QStringLiteral("scan"), dump, QStringLiteral("--json")} + args);
  if (!cli.waitForFinished(300000)) return {};
  return QJsonDocument::fromJson(cli.readAllStandardOutput()).object();
}

}  // namespace attnscope::test
