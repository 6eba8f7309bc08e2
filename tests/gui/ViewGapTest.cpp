// Entry point of the session / overview suite: isolated settings and per-user data folder
// (XDG_DATA_HOME), and tensor values of the dumps its tests write (the fixture is ShownWindow.h).
#include "tests/gui/ViewGapTest.h"

#include <QSettings>
#include <QtTest>

namespace attnscope::test {

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
