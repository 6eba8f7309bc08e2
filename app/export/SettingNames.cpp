// Display names of the run settings (see SettingNames.h).
#include "app/export/SettingNames.h"

namespace attnscope {

QString modeName(Mode mode) {
  return QString::fromLatin1(mode_name(mode));
}

QString maskFillName(MaskFill fill) {
  switch (fill) {
    case MaskFill::neg_inf:
      return QStringLiteral("-inf");
    case MaskFill::neg_1e9:
      return QStringLiteral("-1e9");
    case MaskFill::finfo_min:
      return QStringLiteral("finfo.min");
    case MaskFill::safe:
      return QStringLiteral("safe");
  }
  return {};
}

}  // namespace attnscope
