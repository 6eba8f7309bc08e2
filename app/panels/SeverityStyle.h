// How a severity looks everywhere in the window: the text colour of the findings list and the
// round badge of a scanned case in the dump browser (DESIGN §6).
#pragma once

#include <QColor>
#include <QIcon>
#include <optional>

#include "core/analysis/finding.h"

namespace attnscope {

QColor severityColor(Severity severity);
// A filled dot of the worst severity, a green one for a case without findings; a hollow grey
// ring while the case is not scanned yet and a grey dot when it could not be scanned.
QIcon severityBadge(std::optional<Severity> worst);
QIcon pendingBadge();
QIcon unscannableBadge();

}  // namespace attnscope
