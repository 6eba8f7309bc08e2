// Entry point and fixtures of the export test suite, and the stamped export of the real window:
// PNG / PDF / SVG with the stamp in the picture and the metadata, atomic replacement, and
// "export all views" with its index page.
#include <qcustomplot.h>
#include <QDir>
#include <QImage>
#include <QSettings>
#include <QStandardPaths>
#include <QTabWidget>
#include <QtTest>
#include <algorithm>

#include "app/export/CaseExport.h"
#include "app/gui/AnalysisController.h"
#include "app/gui/AnnotationController.h"
#include "app/gui/ComputeWorker.h"
#include "app/gui/SessionContext.h"
#include "app/panels/HeatmapPanel.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/PlotExport.h"
#include "tests/gui/ExportTest.h"

namespace attnscope::test {

QString badCorpusDir() {
  return QStringLiteral(ATTNSCOPE_BAD_CORPUS);
}

QString cliPath() {
  return QStringLiteral(ATTNSCOPE_CLI);
}

ExportWindow::ExportWindow(bool keepDialogs) : window(std::make_unique<MainWindow>()) {
  if (!keepDialogs) {
    window->setErrorHandler(
        [this](const QString& title, const QString& message, const QString& hint) {
          errors << title + QStringLiteral(": ") + message + QStringLiteral(" | hint: ") + hint;
        });
  }
  window->resize(1400, 900);
  window->show();
  QVERIFY(QTest::qWaitForWindowExposed(window.get()));
}

bool ExportWindow::open(const QString& file, const QString& casePath, int head, Mode mode) {
  SessionContext* ctx = window->context();
  ctx->setPrecision(Precision::f16);
  ctx->setMode(mode);
  if (!window->openTarget({file, casePath})) return false;
  ctx->setHead(head);
  QElapsedTimer timer;
  timer.start();
  while (timer.elapsed() < 120000) {
    QTest::qWait(20);
    const auto r = ctx->result();
    if (r && !window->worker()->busy() && r->request.head == head && r->request.mode() == mode &&
        r->precision == Precision::f16 && QString::fromStdString(r->case_path) == casePath) {
      QTest::qWait(50);  // the views and annotation layers take the result in this turn
      return true;
    }
  }
  return false;
}

void ExportTest::initTestCase() {
  QStandardPaths::setTestModeEnabled(true);
  QCoreApplication::setOrganizationName(QStringLiteral("attnscope-tests"));
  QCoreApplication::setApplicationName(QStringLiteral("attnscope-export-tests"));
  QVERIFY(settingsDir_.isValid());
  QSettings::setDefaultFormat(QSettings::IniFormat);
  QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settingsDir_.path());
  QVERIFY2(QFile::exists(samplePath()), qPrintable(samplePath()));
}

namespace {

QByteArray readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

int64_t pixelsOfColor(const QImage& image, QRgb color) {
  int64_t n = 0;
  for (int y = 0; y < image.height(); ++y) {
    const auto* line = reinterpret_cast<const QRgb*>(image.constScanLine(y));
    for (int x = 0; x < image.width(); ++x) n += (line[x] & 0xffffff) == (color & 0xffffff);
  }
  return n;
}

}  // namespace

void ExportTest::export_png_pdf_svg_carry_the_stamp() {
  SampleCopy dump;
  ExportWindow w;
  QVERIFY(w.open(dump.path, QStringLiteral("/fp16_score_overflow"), 3, Mode::unfused));
  // The dialog proposes a name saying what the figure shows.
  QCOMPARE(w.window->defaultExportName(),
           QStringLiteral("seed_cases_fp16_score_overflow_S_b0h3_fp16-unfused.png"));
  QVERIFY(waitUntil([&] { return w.window->analysis()->summaryCurrent(); }));
  const auto summary = w.window->analysis()->summary();
  QTemporaryDir out;
  QString error;
  const QString png = out.filePath(QStringLiteral("s.png"));
  QVERIFY2(w.window->exportCurrentView(png, &error), qPrintable(error));
  const QImage image(png);
  QVERIFY(!image.isNull());
  // 2x the plot widget plus the two-line stamp footer and the caption: a line per finding
  // (at most 4, then "and N more").
  auto* plot =
      w.window->heatmaps()->view(HeadView::s)->findChild<QWidget*>(QStringLiteral("heatmapPlot_S"));
  QVERIFY(plot != nullptr);
  const int captionLines = static_cast<int>(std::min<size_t>(summary->findings.size(), 4)) +
                           (summary->findings.size() > 4 ? 1 : 0);
  QVERIFY(captionLines >= 2);
  QCOMPARE(image.size(), QSize(plot->width(), plot->height() + 34 + 13 * captionLines) * 2);
  QVERIFY2(image.text(QStringLiteral("attnscope.findings"))
               .startsWith(QStringLiteral("error score_overflow S b0 h3: ")),
           qPrintable(image.text(QStringLiteral("attnscope.findings"))));
  QCOMPARE(image.text(QStringLiteral("attnscope.case")), QStringLiteral("/fp16_score_overflow"));
  QCOMPARE(image.text(QStringLiteral("attnscope.head")), QStringLiteral("3"));
  QCOMPARE(image.text(QStringLiteral("attnscope.precision")), QStringLiteral("fp16"));
  QCOMPARE(image.text(QStringLiteral("attnscope.mode")), QStringLiteral("unfused"));
  QCOMPARE(image.text(QStringLiteral("attnscope.scale")), QStringLiteral("0.125"));
  QCOMPARE(image.text(QStringLiteral("attnscope.clip")), QStringLiteral("off"));
  QCOMPARE(image.text(QStringLiteral("attnscope.file")), dump.path);
  // The +inf band of rows 12-40 is painted in the +inf overlay colour (vivid orange).
  QVERIFY(pixelsOfColor(image, qRgb(0xff, 0x66, 0x00)) > 1000);

  const QString pdf = out.filePath(QStringLiteral("s.pdf"));
  QVERIFY2(w.window->exportCurrentView(pdf, &error), qPrintable(error));
  const QByteArray pdfBytes = readAll(pdf);
  QVERIFY(pdfBytes.startsWith("%PDF-"));
  QVERIFY(pdfBytes.size() > 5000);
  for (const char* part :
       {"<attnscope:case>/fp16_score_overflow</attnscope:case>",
        "<attnscope:head>3</attnscope:head>", "<attnscope:precision>fp16</attnscope:precision>",
        "<attnscope:scale>0.125</attnscope:scale>", "<attnscope:clip>off</attnscope:clip>",
        "<attnscope:view>S</attnscope:view>"}) {
    QVERIFY2(pdfBytes.contains(part), part);
  }

  const QString svg = out.filePath(QStringLiteral("s.svg"));
  QVERIFY2(w.window->exportCurrentView(svg, &error), qPrintable(error));
  const QString svgText = QString::fromUtf8(readAll(svg));
  QVERIFY(svgText.contains(QStringLiteral("<svg")));
  // Footer lines and the automatic marker on the first +inf, as SVG text.
  for (const char* part :
       {"/fp16_score_overflow", "batch 0", "head 3", "fp16 unfused", "scale 0.125", "clip off",
        "mask -inf", "first +inf at (12, ", "error score_overflow S b0 h3"}) {
    QVERIFY2(svgText.contains(QLatin1String(part)), part);
  }
  QCOMPARE(QDir(out.path()).entryList(QDir::Files | QDir::Hidden).size(), 3);
}

void ExportTest::export_replaces_atomically_and_rejects_bad_targets() {
  SampleCopy dump;
  ExportWindow w;
  QTemporaryDir out;
  QString error;
  QVERIFY(!w.window->exportCurrentView(out.filePath(QStringLiteral("early.png")), &error));
  QVERIFY(error.contains(QStringLiteral("nothing to export")));
  QVERIFY(w.open(dump.path, QStringLiteral("/fp16_score_overflow"), 0, Mode::fused));
  const QString png = out.filePath(QStringLiteral("s.png"));
  QVERIFY(w.window->exportCurrentView(png, &error));
  const QByteArray first = readAll(png);
  // An export that fails leaves the previous file as it was and no temporary file behind.
  QVERIFY(!w.window->exportCurrentView(out.filePath(QStringLiteral("s.bmp")), &error));
  QVERIFY(error.contains(QStringLiteral("unsupported export format 'bmp'")));
  QVERIFY(!w.window->exportCurrentView(QStringLiteral("/nonexistent-dir/x.png"), &error));
  QVERIFY(error.startsWith(QStringLiteral("/nonexistent-dir/x.png: cannot write")));
  QCOMPARE(readAll(png), first);
  // Head 3 overwrites the figure in place, complete.
  w.window->context()->setHead(3);
  QTRY_VERIFY_WITH_TIMEOUT(w.window->context()->result()->request.head == 3, 60000);
  QTest::qWait(50);
  QVERIFY(w.window->exportCurrentView(png, &error));
  QCOMPARE(QImage(png).text(QStringLiteral("attnscope.head")), QStringLiteral("3"));
  QCOMPARE(QDir(out.path()).entryList(QDir::Files | QDir::Hidden),
           QStringList{QStringLiteral("s.png")});
}

namespace {

// Pixels of the stepper's gold tile outline (#ffd700, give or take antialiasing).
int outlinePixels(const QImage& image) {
  int n = 0;
  for (int y = 0; y < image.height(); ++y) {
    for (int x = 0; x < image.width(); ++x) {
      const QColor c = image.pixelColor(x, y);
      n += c.red() > 235 && c.green() > 195 && c.green() < 225 && c.blue() < 40;
    }
  }
  return n;
}

}  // namespace

void ExportTest::export_all_views_writes_images_and_index() {
  SampleCopy dump;
  ExportWindow w;
  QVERIFY(w.open(dump.path, QStringLiteral("/fp16_score_overflow"), 3, Mode::unfused));
  Annotation note;
  note.kind = AnnotationKind::text;
  note.view = QStringLiteral("P");
  note.head = 3;
  note.from = note.to = QPointF(30, 20);
  note.text = QStringLiteral("P is NaN on the overflowing rows");
  QVERIFY(w.window->annotations()->addAnnotation(note));
  // A box on the row plot's l series (x = query row, y = value); head 3 like the result.
  Annotation box;
  box.kind = AnnotationKind::box;
  box.view = QStringLiteral("row l");
  box.head = 3;
  box.from = QPointF(12, 0.5);
  box.to = QPointF(40, 2.5);
  box.text = QStringLiteral("l overflows here");
  QVERIFY(w.window->annotations()->addAnnotation(box));
  // The stepper's tile outline is on the screen, not in the figures.
  StepTile tile;
  tile.valid = true;
  tile.window = {0, 64, 0, 64};
  w.window->context()->setStepTile(tile);
  HeatmapView* s = w.window->heatmaps()->view(HeadView::s);
  QVERIFY(s->highlight().has_value());
  QTemporaryDir out;
  const QString folder = out.filePath(QStringLiteral("figures"));  // created by the export
  QString error;
  const QStringList written = w.window->exportAllViews(folder, &error);
  QVERIFY2(error.isEmpty(), qPrintable(error));
  QVERIFY(s->highlight().has_value());
  QVERIFY(outlinePixels(s->plot()->toPixmap().toImage()) > 50);
  QCOMPARE(outlinePixels(QImage(folder + QStringLiteral("/S.png"))), 0);
  QStringList names;
  const QTabWidget* tabs = w.window->heatmaps()->tabs();
  for (int i = 0; i < tabs->count(); ++i) names << tabs->tabText(i);
  QVERIFY(names.size() >= 6);
  // The heatmap tabs, then the row plot's four series.
  const QStringList rowViews = {QStringLiteral("row m, LSE"), QStringLiteral("row l"),
                                QStringLiteral("row ||O_i||"), QStringLiteral("row ||dQ_i||")};
  names += rowViews;
  QCOMPARE(written.size(), 2 * names.size() + 1);
  const QString index = QString::fromUtf8(readAll(folder + QStringLiteral("/index.html")));
  for (const QString& name : names) {
    const QString stem = fileStem(name);
    const QImage image(folder + QLatin1Char('/') + stem + QStringLiteral(".png"));
    QVERIFY2(!image.isNull(), qPrintable(stem));
    QCOMPARE(image.text(QStringLiteral("attnscope.view")), name);
    QCOMPARE(image.text(QStringLiteral("attnscope.case")), QStringLiteral("/fp16_score_overflow"));
    QCOMPARE(image.text(QStringLiteral("attnscope.head")), QStringLiteral("3"));
    QCOMPARE(image.text(QStringLiteral("attnscope.precision")), QStringLiteral("fp16"));
    QVERIFY(QFileInfo(folder + QLatin1Char('/') + stem + QStringLiteral(".svg")).size() > 1000);
    QVERIFY2(index.contains(QStringLiteral("<img src=\"%1.png\"").arg(stem)), qPrintable(stem));
  }
  QVERIFY(index.contains(QStringLiteral("<h2 id=\"row_l\">row l</h2>")));
  // The row plot's annotation is drawn into its series' figure only, and listed under it.
  const auto svgOf = [&](const QString& view) {
    return readAll(folder + QLatin1Char('/') + fileStem(view) + QStringLiteral(".svg"));
  };
  QVERIFY(svgOf(QStringLiteral("row l")).contains("l overflows here"));
  QVERIFY(!svgOf(QStringLiteral("row m, LSE")).contains("l overflows here"));
  const qsizetype rowL = index.indexOf(QStringLiteral("<h2 id=\"row_l\">"));
  const qsizetype boxItem = index.indexOf(QStringLiteral(
      "<li>box from (query row 12.0, value 0.5) to (query row 40.0, value 2.5): l overflows "
      "here</li>"));
  QVERIFY(rowL > 0 && boxItem > rowL);
  QVERIFY(boxItem < index.indexOf(QStringLiteral("<h2 id=\"row_O_i\">")));
  // Readable file names: one '_' per run of other characters, none at the ends.
  QCOMPARE(fileStem(QStringLiteral("row ||O_i||")), QStringLiteral("row_O_i"));
  QCOMPARE(fileStem(QStringLiteral("row m, LSE")), QStringLiteral("row_m_LSE"));
  QCOMPARE(fileStem(QStringLiteral("dQ err")), QStringLiteral("dQ_err"));
  QCOMPARE(fileStem(QStringLiteral("||")), QStringLiteral("view"));
  for (const char* part : {"<td>case</td><td>/fp16_score_overflow</td>", "<td>head</td><td>3</td>",
                           "<td>precision</td><td>fp16</td>", "<td>mode</td><td>unfused</td>",
                           "<td>clip</td><td>off</td>", "marker arrow", "first +inf at (12, ",
                           "text at (row 20.0, col 30.0): P is NaN on the overflowing rows"}) {
    QVERIFY2(index.contains(QLatin1String(part)), part);
  }
}

}  // namespace attnscope::test

QTEST_MAIN(attnscope::test::ExportTest)
