// Atomic export of a QCustomPlot figure to PNG, PDF or SVG: the plot plus a footer holding the
// FigureStamp, with the stamp also in the file's metadata (PNG text chunk, PDF title and XMP,
// SVG title and description). Written through QSaveFile (temporary file in the target's
// directory, renamed over the target on success), so a failed or killed export leaves the
// previous file intact.
#pragma once

#include <QSize>
#include <QString>
#include <QStringList>

#include "app/plot/FigureStamp.h"

class QCustomPlot;
class QWidget;

namespace attnscope {

// File suffixes exportPlot understands: "png", "pdf", "svg".
QStringList exportFormats();
// The QCustomPlot version the figures are drawn with ("2.1.0").
QString plotLibraryVersion();

// Height in pixels of the stamp footer below the plot (0 for an empty stamp).
int stampFooterHeight(const FigureStamp& stamp);

// Writes `plot` (at its widget size) to `path` in the format its suffix names, with the stamp
// footer when the stamp is not empty. The PNG is rendered at 2x. False with a message naming
// the path and the problem on failure (unknown suffix, unwritable directory, renderer error).
bool exportPlot(QCustomPlot* plot, const QString& path, const FigureStamp& stamp, QString* error);
bool exportPlot(QCustomPlot* plot, const QString& path, QString* error);
// exportPlot on the QCustomPlot inside `view` (a HeatmapView, RowPlotView, ...), replotted
// first; false with a message when the widget holds no plot.
bool exportView(QWidget* view, const QString& path, const FigureStamp& stamp, QString* error);

// Size in pixels of the figure exportPlot writes for `plot` (PNG: twice this).
QSize figureSize(QCustomPlot* plot, const FigureStamp& stamp);

}  // namespace attnscope
