// Display names of the run settings (see SettingNames.h).
#include "app/export/SettingNames.h"

namespace attnscope {

QString modeName(Mode mode) {
  return QString::fromLatin1(mode_name(mode));
}

QString maskFillName(MaskFill fill) {
  return QString::fromLatin1(mask_fill_label(fill));
}

}  // namespace attnscope
