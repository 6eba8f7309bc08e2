// Stamped export of the views of one computed head: the FigureStamp of a result, and "export
// all views of this case" into a folder (PNG + SVG per view, heatmaps and the row plot's series,
// and an index.html that lists the images with the stamp and the annotations of each view).
// Shared by the GUI and `attnscope-cli export`.
#pragma once

#include <QList>
#include <QSize>
#include <QString>
#include <QStringList>
#include <functional>
#include <memory>
#include <vector>

#include "app/plot/Annotation.h"
#include "app/plot/FigureStamp.h"
#include "core/analysis/finding.h"
#include "core/view/head_compute.h"

class QWidget;

namespace attnscope {

class RowPlotView;

// The stamp of `view` of a result: file, case, batch / head, precision, mode (and backend when
// not the own CPU kernel), scale, mask fill, and the clip: "off", or "max_norm X per case (total
// T, coef C)" (per kv-head) as clip_grad_norm_ applied it.
FigureStamp stampFor(const HeadResult& result, const QString& view);
// The figure caption of a case's findings (FigureStamp::findings): "error score_overflow S b0
// h3: message" a line, the first four (the list is worst first), then "and N more finding(s)".
QStringList findingCaption(const std::vector<Finding>& findings);

// One view to export: its name (file stem and index heading), the widget holding its plot and
// the annotations drawn on it (listed on the index page).
struct ViewExport {
  QString name;
  QWidget* widget = nullptr;
  QList<Annotation> annotations;
};

// The row plot's series of a result as views to export, one per series and named like the row
// plot's annotations ("row m, LSE", "row l", "row ||O_i||", "row ||dQ_i||"): each drawn into its
// own offscreen RowPlotView of `size` (owned here) with the user's annotations of that series,
// annotationsOf(view).
class RowPlotExports {
 public:
  RowPlotExports(const HeadResult& result,
                 const std::function<QList<Annotation>(const QString& view)>& annotationsOf,
                 QSize size = QSize(1000, 520));
  ~RowPlotExports();
  const QList<ViewExport>& views() const { return views_; }

 private:
  std::vector<std::unique_ptr<RowPlotView>> plots_;
  QList<ViewExport> views_;
};

// Writes `<name>.png` and `<name>.svg` of every view into `folder` (created if missing), then
// `index.html`; each file atomically. `stamp` is the case's stamp (its view is replaced per
// view). Returns the files written; on failure sets `error` (the files written so far stay).
QStringList exportAllViews(const QList<ViewExport>& views, const FigureStamp& stamp,
                           const QString& folder, QString* error);

// The index page for the views (file names `<name>.png` / `<name>.svg`).
QString indexHtml(const QList<ViewExport>& views, const FigureStamp& stamp);

// A view name as a file stem: letters, digits and '-' kept, each run of anything else one '_',
// none at either end ("row ||O_i||" -> "row_O_i", "dQ err" -> "dQ_err"); "view" when empty.
QString fileStem(const QString& name);

}  // namespace attnscope
