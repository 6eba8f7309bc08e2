// Atomic export of a QCustomPlot figure: rendered into a temporary file next to the target,
// then renamed over it, so a failed or interrupted export never leaves a half-written file.
#pragma once

#include <QString>
#include <QStringList>

class QCustomPlot;

namespace attnscope {

// File suffixes exportPlot understands ("png", "pdf"; "svg" when built with Qt Svg).
QStringList exportFormats();

// Writes `plot` to `path` in the format its suffix names. False with a message naming the
// path and the problem on failure (unknown suffix, unwritable directory, renderer error).
bool exportPlot(QCustomPlot* plot, const QString& path, QString* error);

}  // namespace attnscope
