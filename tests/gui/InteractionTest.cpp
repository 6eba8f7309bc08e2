// Entry point of the interaction test suite: isolated settings (the fixture is ShownWindow.h).
#include "tests/gui/InteractionTest.h"

#include <QApplication>
#include <QSettings>
#include <QStandardPaths>
#include <QtTest>

namespace attnscope::test {

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
