// Display names of the run settings as the controls, the figure stamps and the sidecar's view
// state write them (the sidecar reads them back, so they never change).
#pragma once

#include <QString>

#include "core/case_inputs.h"
#include "core/kernel_registry.h"

namespace attnscope {

QString modeName(Mode mode);          // "fused", "unfused" (core's mode_name)
QString maskFillName(MaskFill fill);  // "-inf", "-1e9", "finfo.min", "safe"

}  // namespace attnscope
