// Waiting on the event loop and annotation building for the GUI tests (see TestSupport.h).
#include "tests/gui/TestSupport.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QtTest>

namespace attnscope::test {

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

}  // namespace attnscope::test
