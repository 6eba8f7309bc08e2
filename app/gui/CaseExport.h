// Stamped export of the views of one computed head: the FigureStamp of a result, and "export
// all views of this case" into a folder (PNG + SVG per view, and an index.html that lists the
// images with the stamp and the annotations of each view). Shared by the GUI and
// `attnscope-cli export`.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>

#include "app/gui/HeadCompute.h"
#include "app/plot/Annotation.h"
#include "app/plot/FigureStamp.h"

class QWidget;

namespace attnscope {

// The stamp of `view` of a result: file, case, batch / head, precision, mode (and backend when
// not the own CPU kernel), scale, mask fill, and the clip: "off", or "max_norm X (total T,
// coef C)" as clip_grad_norm_ applied it.
FigureStamp stampFor(const HeadResult& result, const QString& view);

// One view to export: its name (file stem and index heading), the widget holding its plot and
// the annotations drawn on it (listed on the index page).
struct ViewExport {
  QString name;
  QWidget* widget = nullptr;
  QList<Annotation> annotations;
};

// Writes `<name>.png` and `<name>.svg` of every view into `folder` (created if missing), then
// `index.html`; each file atomically. `stamp` is the case's stamp (its view is replaced per
// view). Returns the files written; on failure sets `error` (the files written so far stay).
QStringList exportAllViews(const QList<ViewExport>& views, const FigureStamp& stamp,
                           const QString& folder, QString* error);

// The index page for the views (file names `<name>.png` / `<name>.svg`).
QString indexHtml(const QList<ViewExport>& views, const FigureStamp& stamp);

// A view name as a file stem: letters, digits, '-' and '_' kept, anything else '_'.
QString fileStem(const QString& name);

}  // namespace attnscope
