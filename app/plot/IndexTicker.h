// The ticker of an index axis (query row i, key j, training step): integer ticks only.
#pragma once

#include <QSharedPointer>

class QCPAxisTicker;

namespace attnscope {

// Ticks 1, 2, 5, 10, ... apart, never between two indices (no 2.5 on an axis of 8 rows).
QSharedPointer<QCPAxisTicker> indexTicker();

}  // namespace attnscope
