// The GUI's --probe-timeout option (AppOptions): a number of seconds > 0 is taken, anything
// else is a usage error naming the option and the value.
#include <gtest/gtest.h>

#include "app/gui/AppOptions.h"

namespace attnscope {
namespace {

TEST(GuiProbeTimeout, option_parsed_and_bad_values_refused_naming_it) {
  const auto parse = [](const QString& value) {
    return parseCommandLine(
        {QStringLiteral("attnscope"), QStringLiteral("--probe-timeout"), value});
  };
  const AppOptions ok = parse(QStringLiteral("2.5"));
  EXPECT_TRUE(ok.error.isEmpty()) << ok.error.toStdString();
  ASSERT_TRUE(ok.probeTimeout.has_value());
  EXPECT_EQ(*ok.probeTimeout, 2.5);
  EXPECT_FALSE(parseCommandLine({QStringLiteral("attnscope")}).probeTimeout.has_value());
  for (const char* bad : {"0", "-3", "abc", "nan", "inf", "1e7", ""}) {
    const AppOptions refused = parse(QString::fromLatin1(bad));
    EXPECT_FALSE(refused.probeTimeout.has_value()) << bad;
    EXPECT_TRUE(refused.error.startsWith(QStringLiteral("--probe-timeout: '") + bad + "'"))
        << bad << ": " << refused.error.toStdString();
  }
}

}  // namespace
}  // namespace attnscope
