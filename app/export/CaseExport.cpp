// Stamps of computed results and the "export all views" folder with its index page (see
// CaseExport.h).
#include "app/export/CaseExport.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include "app/export/HeadRowSeries.h"
#include "app/export/SettingNames.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/PlotExport.h"
#include "app/plot/RowPlotView.h"

namespace attnscope {
namespace {

QString cell(const QString& text) {
  return QStringLiteral("<td>%1</td>").arg(text.toHtmlEscaped());
}

// A point of an annotation: (row, col) on a heatmap; (query row, value) on the row plot, whose
// annotations carry x = query row, y = value.
QString point(const Annotation& a, QPointF p) {
  if (rowSeriesOfView(a.view)) {
    return QStringLiteral("(query row %1, value %2)").arg(p.x(), 0, 'f', 1).arg(p.y(), 0, 'g', 6);
  }
  return QStringLiteral("(row %1, col %2)").arg(p.y(), 0, 'f', 1).arg(p.x(), 0, 'f', 1);
}

QString describe(const Annotation& a) {
  const QString where = a.kind == AnnotationKind::text
                            ? QStringLiteral("at ") + point(a, a.from)
                            : QStringLiteral("from %1 to %2").arg(point(a, a.from), point(a, a.to));
  return QStringLiteral("%1%2 %3%4")
      .arg(a.automatic ? QStringLiteral("marker ") : QString(), annotationKindName(a.kind), where,
           a.text.isEmpty() ? QString() : QStringLiteral(": ") + a.text);
}

bool writeAtomically(const QString& path, const QByteArray& bytes, QString* error) {
  QSaveFile out(path);
  if (out.open(QIODevice::WriteOnly) && out.write(bytes) == bytes.size() && out.commit()) {
    return true;
  }
  if (error) *error = QStringLiteral("%1: cannot write: %2").arg(path, out.errorString());
  return false;
}

}  // namespace

FigureStamp stampFor(const HeadResult& r, const QString& view) {
  FigureStamp s;
  s.view = view;
  s.file = QFileInfo(QFile::decodeName(r.file_path.c_str())).absoluteFilePath();
  s.casePath = QString::fromStdString(r.case_path);
  s.batch = r.request.batch;
  s.head = r.request.head;
  s.precision = QString::fromLatin1(precision_name(r.precision));
  s.mode = modeName(r.request.mode());
  if (!r.backend.empty() && r.backend != "cpu") {
    s.mode += QStringLiteral(" (%1)").arg(QString::fromStdString(r.backend));
  }
  s.scale = r.scale;
  if (r.clip) {
    s.clip = QStringLiteral("max_norm %1 per %2 (total %3, coef %4)")
                 .arg(r.clip->max_norm, 0, 'g', 6)
                 .arg(QLatin1String(clip_scope_name(r.request.run.clip_scope)))
                 .arg(r.clip->total_norm, 0, 'g', 6)
                 .arg(r.clip->coef, 0, 'g', 6);
  }
  s.maskFill = maskFillName(r.mask_fill);
  return s;
}

QStringList findingCaption(const std::vector<Finding>& findings) {
  constexpr size_t kLines = 4;
  QStringList caption;
  for (size_t i = 0; i < findings.size() && i < kLines; ++i) {
    const Finding& f = findings[i];
    QString where = QString::fromStdString(f.tensor);
    if (f.batch >= 0) where += QStringLiteral(" b%1").arg(f.batch);
    if (f.head >= 0) where += QStringLiteral(" h%1").arg(f.head);
    caption << QStringLiteral("%1 %2 %3: %4")
                   .arg(QLatin1String(severity_name(f.severity)),
                        QLatin1String(finding_kind_name(f.kind)), where,
                        QString::fromStdString(f.message));
  }
  if (findings.size() > kLines) {
    caption << QStringLiteral("and %1 more finding(s)").arg(findings.size() - kLines);
  }
  return caption;
}

RowPlotExports::RowPlotExports(
    const HeadResult& result,
    const std::function<QList<Annotation>(const QString& view)>& annotationsOf, QSize size) {
  for (const RowSeriesKind kind : allRowSeries()) {
    auto plot = std::make_unique<RowPlotView>();
    const HeadRowSeries rows = head_row_series(result, kind);
    plot->setData(rowSeriesTitle(result, kind), rows.series, rows.thresholds);
    const QString view = rowSeriesView(kind);
    const QList<Annotation> annotations = annotationsOf(view);
    AnnotationLayer::of(plot.get())->setAnnotations(annotations);
    // Laid out at `size` without appearing on screen (exportView draws the plot at its size).
    plot->setAttribute(Qt::WA_DontShowOnScreen);
    plot->resize(size);
    plot->show();
    views_.append({view, plot.get(), annotations});
    plots_.push_back(std::move(plot));
  }
}

RowPlotExports::~RowPlotExports() = default;

QString fileStem(const QString& name) {
  QString stem;
  for (const QChar c : name) {
    if (c.isLetterOrNumber() || c == QLatin1Char('-')) {
      stem += c;
    } else if (!stem.isEmpty() && !stem.endsWith(QLatin1Char('_'))) {
      stem += QLatin1Char('_');  // a run of anything else is one '_'
    }
  }
  if (stem.endsWith(QLatin1Char('_'))) stem.chop(1);
  return stem.isEmpty() ? QStringLiteral("view") : stem;
}

QString indexHtml(const QList<ViewExport>& views, const FigureStamp& stamp) {
  QString html =
      QStringLiteral(
          "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n<title>attnscope: %1</title>\n"
          "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
          "td{border:1px solid #ccc;padding:2px 8px}img{max-width:100%;border:1px solid #ddd}"
          "</style>\n</head><body>\n<h1>attnscope: %1</h1>\n<table class=\"stamp\">\n")
          .arg((stamp.casePath + QStringLiteral(" · ") + QFileInfo(stamp.file).fileName())
                   .toHtmlEscaped());
  for (const auto& [label, value] : stamp.fields()) {
    if (label != QStringLiteral("view")) {
      html += QStringLiteral("<tr>%1%2</tr>\n").arg(cell(label), cell(value));
    }
  }
  html += QStringLiteral("<tr>%1%2</tr>\n</table>\n")
              .arg(cell(QStringLiteral("exported")),
                   cell(QDateTime::currentDateTimeUtc().toString(Qt::ISODate)));
  for (const ViewExport& v : views) {
    const QString stem = fileStem(v.name).toHtmlEscaped();
    html += QStringLiteral(
                "<h2 id=\"%1\">%2</h2>\n<p><a href=\"%1.svg\">SVG</a></p>\n"
                "<img src=\"%1.png\" alt=\"%2\">\n")
                .arg(stem, v.name.toHtmlEscaped());
    if (!v.annotations.isEmpty()) {
      html += QStringLiteral("<ul class=\"annotations\">\n");
      for (const Annotation& a : v.annotations) {
        html += QStringLiteral("<li>%1</li>\n").arg(describe(a).toHtmlEscaped());
      }
      html += QStringLiteral("</ul>\n");
    }
  }
  return html + QStringLiteral("</body></html>\n");
}

QStringList exportAllViews(const QList<ViewExport>& views, const FigureStamp& stamp,
                           const QString& folder, QString* error) {
  QStringList written;
  if (!QDir().mkpath(folder)) {
    if (error) *error = QStringLiteral("%1: cannot create the folder").arg(folder);
    return written;
  }
  const QDir dir(folder);
  for (const ViewExport& v : views) {
    FigureStamp viewStamp = stamp;
    viewStamp.view = v.name;
    for (const char* suffix : {".png", ".svg"}) {
      const QString path = dir.filePath(fileStem(v.name) + QLatin1String(suffix));
      if (!exportView(v.widget, path, viewStamp, error)) return written;
      written << path;
    }
  }
  const QString index = dir.filePath(QStringLiteral("index.html"));
  if (!writeAtomically(index, indexHtml(views, stamp).toUtf8(), error)) return written;
  written << index;
  return written;
}

}  // namespace attnscope
