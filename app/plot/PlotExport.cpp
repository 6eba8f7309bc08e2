// PNG / PDF / SVG export of a QCustomPlot with a stamp footer, through QSaveFile.
#include "app/plot/PlotExport.h"

#include <qcustomplot.h>

#include <QFileInfo>
#include <QImage>
#include <QPageLayout>
#include <QPageSize>
#include <QPdfWriter>
#include <QSaveFile>
#include <QSvgGenerator>

namespace attnscope {
namespace {

constexpr double kPngScale = 2.0;
constexpr int kScreenDpi = 96;      // figures keep the on-screen proportions of text and lines
constexpr int kFooterPx = 34;       // two lines of 8 pt text
constexpr int kCaptionLinePx = 13;  // one more line of 8 pt text per finding
const QSize kFallbackSize(900, 700);

QSize plotSize(QCustomPlot* plot) {
  return plot->width() > 50 && plot->height() > 50 ? plot->size() : kFallbackSize;
}

// Draws the plot into (0, 0, w, h) and the stamp into the footer band below it.
void paintFigure(QCPPainter& painter, QCustomPlot* plot, QSize size, const FigureStamp& stamp) {
  plot->toPainter(&painter, size.width(), size.height());
  if (stamp.empty()) return;
  QFont font(plot->font().family());
  font.setPointSizeF(8);
  painter.setFont(font);
  painter.setPen(QColor(0x30, 0x30, 0x30));
  const QRect band(6, size.height() + 2, size.width() - 12, kFooterPx - 4);
  painter.drawText(band, Qt::AlignLeft | Qt::AlignTop,
                   stamp.firstLine() + QLatin1Char('\n') + stamp.secondLine());
  // The caption: one finding a line, elided to the figure's width (whole in the metadata).
  const QFontMetrics metrics(font, painter.device());
  int y = size.height() + kFooterPx;
  for (const QString& line : stamp.findings) {
    const QRect row(6, y, size.width() - 12, kCaptionLinePx);
    painter.drawText(row, Qt::AlignLeft | Qt::AlignTop,
                     metrics.elidedText(line, Qt::ElideRight, row.width()));
    y += kCaptionLinePx;
  }
}

QByteArray xmpPacket(const FigureStamp& stamp) {
  QString fields;
  for (const auto& [label, value] : stamp.fields()) {
    fields += QStringLiteral("   <attnscope:%1>%2</attnscope:%1>\n")
                  .arg(QString(label).remove(QLatin1Char(' ')), value.toHtmlEscaped());
  }
  const QString xml = QStringLiteral(
      "<?xpacket begin=\"\" id=\"W5M0MpCehiHzreSzNTczkc9d\"?>\n"
      "<x:xmpmeta xmlns:x=\"adobe:ns:meta/\">\n"
      " <rdf:RDF xmlns:rdf=\"http://www.w3.org/1999/02/22-rdf-syntax-ns#\">\n"
      "  <rdf:Description rdf:about=\"\" xmlns:dc=\"http://purl.org/dc/elements/1.1/\"\n"
      "    xmlns:xmp=\"http://ns.adobe.com/xap/1.0/\"\n"
      "    xmlns:attnscope=\"https://attnscope.invalid/ns/stamp/1.0/\">\n"
      "   <dc:title><rdf:Alt><rdf:li xml:lang=\"x-default\">%1</rdf:li></rdf:Alt></dc:title>\n"
      "   <xmp:CreatorTool>attnscope</xmp:CreatorTool>\n"
      "%2"
      "  </rdf:Description>\n"
      " </rdf:RDF>\n"
      "</x:xmpmeta>\n"
      "<?xpacket end=\"w\"?>\n");
  return xml.arg(stamp.oneLine().toHtmlEscaped(), fields).toUtf8();
}

bool writePng(QCustomPlot* plot, QSize size, const FigureStamp& stamp, QIODevice* out) {
  const QSize figure(size.width(), size.height() + stampFooterHeight(stamp));
  QImage image(figure * kPngScale, QImage::Format_ARGB32);
  image.fill(Qt::white);
  image.setText(QStringLiteral("Software"), QStringLiteral("attnscope"));
  if (!stamp.empty()) {
    image.setText(QStringLiteral("Title"), stamp.oneLine());
    for (const auto& [label, value] : stamp.fields()) {
      image.setText(QStringLiteral("attnscope.") + QString(label).remove(QLatin1Char(' ')), value);
    }
  }
  {
    QCPPainter painter(&image);
    painter.setRenderHint(QPainter::Antialiasing);
    painter.setRenderHint(QPainter::TextAntialiasing);
    painter.setMode(QCPPainter::pmNonCosmetic);
    painter.scale(kPngScale, kPngScale);
    paintFigure(painter, plot, size, stamp);
  }
  return image.save(out, "PNG");
}

bool writePdf(QCustomPlot* plot, QSize size, const FigureStamp& stamp, QIODevice* out) {
  const QSize figure(size.width(), size.height() + stampFooterHeight(stamp));
  QPdfWriter writer(out);
  writer.setCreator(QStringLiteral("attnscope"));
  writer.setTitle(stamp.empty() ? plot->windowTitle() : stamp.oneLine());
  if (!stamp.empty()) writer.setDocumentXmpMetadata(xmpPacket(stamp));
  writer.setResolution(kScreenDpi);
  const QSizeF points = QSizeF(figure) * (72.0 / kScreenDpi);
  writer.setPageLayout(
      QPageLayout(QPageSize(points, QPageSize::Point, QString(), QPageSize::ExactMatch),
                  QPageLayout::Portrait, QMarginsF()));
  QCPPainter painter;
  if (!painter.begin(&writer)) return false;
  painter.setMode(QCPPainter::pmVectorized);
  painter.setMode(QCPPainter::pmNoCaching);
  painter.setWindow(QRect(QPoint(0, 0), figure));
  paintFigure(painter, plot, size, stamp);
  return painter.end();
}

bool writeSvg(QCustomPlot* plot, QSize size, const FigureStamp& stamp, QIODevice* out) {
  const QSize figure(size.width(), size.height() + stampFooterHeight(stamp));
  QSvgGenerator svg;
  svg.setOutputDevice(out);
  svg.setSize(figure);
  svg.setViewBox(QRect(QPoint(0, 0), figure));
  svg.setResolution(kScreenDpi);
  svg.setTitle(stamp.empty() ? plot->windowTitle() : stamp.oneLine());
  svg.setDescription(QStringLiteral("exported by attnscope"));
  QCPPainter painter;
  if (!painter.begin(&svg)) return false;
  painter.setMode(QCPPainter::pmVectorized);
  painter.setMode(QCPPainter::pmNoCaching);
  paintFigure(painter, plot, size, stamp);
  return painter.end();
}

}  // namespace

QString plotLibraryVersion() {
  return QStringLiteral(QCUSTOMPLOT_VERSION_STR);
}

QStringList exportFormats() {
  return {QStringLiteral("png"), QStringLiteral("pdf"), QStringLiteral("svg")};
}

int stampFooterHeight(const FigureStamp& stamp) {
  return stamp.empty() ? 0 : kFooterPx + kCaptionLinePx * static_cast<int>(stamp.findings.size());
}

QSize figureSize(QCustomPlot* plot, const FigureStamp& stamp) {
  const QSize size = plotSize(plot);
  return {size.width(), size.height() + stampFooterHeight(stamp)};
}

bool exportPlot(QCustomPlot* plot, const QString& path, const FigureStamp& stamp, QString* error) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (!exportFormats().contains(suffix)) {
    if (error) {
      *error = QStringLiteral("%1: unsupported export format '%2' (use %3)")
                   .arg(path, suffix, exportFormats().join(QStringLiteral(", ")));
    }
    return false;
  }
  QSaveFile out(path);
  if (!out.open(QIODevice::WriteOnly)) {
    if (error) *error = QStringLiteral("%1: cannot write: %2").arg(path, out.errorString());
    return false;
  }
  const QSize size = plotSize(plot);
  bool written = false;
  if (suffix == QStringLiteral("png")) {
    written = writePng(plot, size, stamp, &out);
  } else if (suffix == QStringLiteral("pdf")) {
    written = writePdf(plot, size, stamp, &out);
  } else {
    written = writeSvg(plot, size, stamp, &out);
  }
  plot->replot(QCustomPlot::rpQueuedReplot);  // toPainter re-laid the plot out at `size`
  if (!written || out.size() == 0) {
    out.cancelWriting();
    if (error) *error = QStringLiteral("%1: the renderer could not write the figure").arg(path);
    return false;
  }
  if (!out.commit()) {
    if (error)
      *error = QStringLiteral("%1: cannot replace the file: %2").arg(path, out.errorString());
    return false;
  }
  return true;
}

bool exportPlot(QCustomPlot* plot, const QString& path, QString* error) {
  return exportPlot(plot, path, FigureStamp{}, error);
}

bool exportView(QWidget* view, const QString& path, const FigureStamp& stamp, QString* error) {
  auto* plot = view == nullptr ? nullptr : view->findChild<QCustomPlot*>();
  if (plot == nullptr) {
    if (error) *error = QStringLiteral("%1: this view holds no plot to export").arg(path);
    return false;
  }
  plot->replot(QCustomPlot::rpImmediateRefresh);
  return exportPlot(plot, path, stamp, error);
}

}  // namespace attnscope
