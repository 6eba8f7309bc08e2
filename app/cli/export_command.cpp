// `attnscope-cli export FILE[::CASE] --view V --out PATH`: recomputes one (batch, head) like the
// GUI, draws the view with the GUI's HeatmapView / RowPlotView (offscreen when there is no
// display), adds the automatic markers and the user's annotations from the dump's sidecar
// session (read only), and writes the stamped figure atomically.
#include "export_command.h"

#include <QApplication>
#include <QFileInfo>
#include <iostream>

#include "app/export/CaseExport.h"
#include "app/export/HeadRowSeries.h"
#include "app/export/SessionFile.h"
#include "app/plot/AnnotationLayer.h"
#include "app/plot/HeatmapView.h"
#include "app/plot/PlotExport.h"
#include "app/plot/RowPlotView.h"
#include "cli_options.h"
#include "core/view/case_summary.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "export";
constexpr int64_t kGridPixels = 1024;  // score matrices up to 1024 x 1024 stay full resolution
const QSize kFigureSize(1000, 820);
const QStringList kRowViews = {QStringLiteral("lse"), QStringLiteral("l"), QStringLiteral("o_norm"),
                               QStringLiteral("dq_norm")};

QString availableViews() {
  return QString::fromStdString(head_view_names("|")) + QLatin1Char('|') +
         kRowViews.join(QLatin1Char('|'));
}

// The output path with the format's suffix; nullopt (after printing why) on a conflict.
std::optional<QString> outputPath(const CommandArgs& args) {
  const std::string* out = args.option("out");
  if (out == nullptr || out->empty()) {
    reject(kCommand, "--out PATH is required", "e.g. --out figure.png");
    return std::nullopt;
  }
  QString path = QString::fromStdString(*out);
  const QString suffix = QFileInfo(path).suffix().toLower();
  const std::string* format = args.option("format");
  const QString wanted = format ? QString::fromStdString(*format).toLower() : suffix;
  if (!exportFormats().contains(wanted)) {
    reject(kCommand, "unknown format '" + wanted.toStdString() + "'",
           "--format png|pdf|svg, or an --out name ending in .png, .pdf or .svg");
    return std::nullopt;
  }
  if (suffix != wanted) {
    if (exportFormats().contains(suffix)) {
      reject(kCommand, "--out " + *out + " does not end in ." + wanted.toStdString(),
             "drop --format or name the file ." + wanted.toStdString());
      return std::nullopt;
    }
    path += QLatin1Char('.') + wanted;
  }
  return path;
}

RowSeriesKind rowSeriesKind(const QString& view) {
  if (view == QStringLiteral("lse")) return RowSeriesKind::m_lse;
  if (view == QStringLiteral("l")) return RowSeriesKind::l;
  if (view == QStringLiteral("o_norm")) return RowSeriesKind::o_norm;
  return RowSeriesKind::dq_norm;
}

// The user's annotations of `view` (the GUI's name: "row l" for the l row plot) from the
// sidecar, read without repairing anything.
QList<Annotation> sidecarAnnotations(const FigureStamp& stamp, const QString& view) {
  QList<Annotation> list;
  const SessionFile session = SessionFile::load(stamp.file, /*repair=*/false);
  for (const QString& note : session.notes()) {
    std::cerr << "attnscope-cli export: note: " << note.toStdString() << "\n";
  }
  for (const Annotation& a : session.cases.value(stamp.casePath).annotations) {
    if (a.view == view && a.batch == stamp.batch && a.head == stamp.head) list << a;
  }
  return list;
}

int render(const std::shared_ptr<const HeadResult>& shared, const QString& view, const QString& out,
           bool markers, const std::vector<Finding>& findings) {
  const HeadResult& result = *shared;
  FigureStamp stamp = stampFor(result, view);
  stamp.findings = findingCaption(findings);
  const QString title = stamp.firstLine() + QStringLiteral("  ·  ") + stamp.secondLine();
  std::unique_ptr<QWidget> widget;
  if (kRowViews.contains(view)) {
    auto rows = std::make_unique<RowPlotView>();
    const RowSeriesKind kind = rowSeriesKind(view);
    const HeadRowSeries series = head_row_series(result, kind);
    rows->setData(title, series.series, series.thresholds);
    AnnotationLayer::of(rows.get())->setAnnotations(sidecarAnnotations(stamp, rowSeriesView(kind)));
    widget = std::move(rows);
  } else {
    const HeadView v = *head_view_named(view.toStdString());  // run_export checked the name
    const MatrixGrid* grid = &result.grid(v);
    if (grid->empty()) {
      return fail(kCommand, "view '" + view.toStdString() + "' is not computed for this case",
                  "--view " + availableViews().toStdString());
    }
    auto heatmap = std::make_unique<HeatmapView>(v);
    heatmap->setGrid(std::shared_ptr<const MatrixGrid>(shared, grid), true);
    heatmap->setStamp(stamp.firstLine().section(QStringLiteral(" · "), 1) + QStringLiteral(" · ") +
                      stamp.secondLine());
    QList<Annotation> annotations = sidecarAnnotations(stamp, view);
    if (markers) annotations += automaticMarkers(*grid, view, stamp.batch, stamp.head);
    AnnotationLayer::of(heatmap.get())->setAnnotations(annotations);
    widget = std::move(heatmap);
  }
  widget->setAttribute(Qt::WA_DontShowOnScreen);
  widget->resize(kFigureSize);
  widget->show();
  QCoreApplication::processEvents();
  QString error;
  if (!exportView(widget.get(), out, stamp, &error)) {
    return fail(kCommand, error.toStdString(), "pick a writable folder");
  }
  std::cout << "wrote " << out.toStdString() << " (" << view.toStdString() << " of "
            << result.case_path << ", batch " << stamp.batch << " head " << stamp.head << ", "
            << stamp.precision.toStdString() << " " << stamp.mode.toStdString() << ")\n";
  return kExitOk;
}

}  // namespace

int run_export(const CommandArgs& args) {
  if (!check_options(args, kCommand,
                     {"view", "format", "out", "batch", "head", "precision", "mode", "scale",
                      "mask-fill", "clip", "clip-scope", "threads", "no-markers", "no-caption"})) {
    return kExitUnreadable;
  }
  if (args.positional.size() != 1) {
    return fail(kCommand, "expected one FILE[::CASE]",
                "e.g. attnscope-cli export dump.h5::/case --view S --out s.png");
  }
  const std::string* viewText = args.option("view");
  const QString view = viewText ? QString::fromStdString(*viewText) : QStringLiteral("S");
  const std::optional<HeadView> heatmap = head_view_named(view.toStdString());
  if (!heatmap && !kRowViews.contains(view)) {
    return fail(kCommand, "unknown view '" + view.toStdString() + "'",
                "--view " + availableViews().toStdString());
  }
  const std::optional<QString> out = outputPath(args);
  HeadRequest request;
  if (!out || !read_run_settings(args, kCommand, request.run)) return kExitUnreadable;
  if (const std::string* mode = args.option("mode")) {
    const auto modes = parse_modes(*mode);
    if (!modes || modes->size() != 1) {
      return fail(kCommand, "bad --mode '" + *mode + "'", "fused or unfused");
    }
    request.run.modes = {modes->front()};
  }
  if (const std::string* clip = args.option("clip")) {
    request.run.clip_norm = parse_positive(*clip);
    if (!request.run.clip_norm)
      return fail(kCommand, "bad --clip '" + *clip + "'", "a max norm > 0");
  }
  if (const std::string* scope = args.option("clip-scope")) {
    const std::optional<ClipScope> named = clip_scope_named(*scope);
    if (!named) return fail(kCommand, "bad --clip-scope '" + *scope + "'", "case or kv-head");
    request.run.clip_scope = *named;
  }
  if (const std::string* threads = args.option("threads")) {
    const auto n = parse_threads(*threads);
    if (!n) return fail(kCommand, "bad --threads '" + *threads + "'", "a count from 1 to 1024");
    request.threads = *n;
  }
  auto [file, casePath] = split_case_ref(args.positional[0]);
  std::optional<DumpReader> dump = open_dump(kCommand, file, args.allow_external);
  if (!dump) return kExitUnreadable;
  if (casePath.empty()) casePath = dump->cases().front().path;
  const std::optional<CaseData> data = load_case(kCommand, *dump, casePath);
  if (!data) return kExitUnreadable;
  const auto batch = read_index(args, kCommand, "batch", data->info.dims.batch);
  const auto head =
      batch ? read_index(args, kCommand, "head", data->info.dims.heads) : std::nullopt;
  if (!batch || !head) return kExitUnreadable;
  request.batch = *batch;
  request.head = *head;
  request.out_rows = request.out_cols = kGridPixels;
  request.reference = heatmap && is_error_view(*heatmap);  // error grids need the fp64 run
  Result<HeadResult> result = compute_head(*data, request);
  if (!result) {
    return fail(kCommand, case_error_text(file, casePath, result.error().message),
                result.error().hint);
  }
  // The caption: the case's findings under the same run, as the window's export has them (an
  // analysis of the whole case; --no-caption skips it).
  std::vector<Finding> findings;
  if (!args.flag("no-caption")) {
    SummarySettings summarySettings;
    summarySettings.run = request.run;
    summarySettings.threads = request.threads;
    Result<CaseSummary> summary = summarize_case(*data, summarySettings);
    if (!summary) {
      return fail(kCommand, case_error_text(file, casePath, summary.error().message),
                  summary.error().hint);
    }
    findings = std::move(summary->findings);
  }
  auto shared = std::make_shared<HeadResult>(std::move(result).value());
  shared->file_path = file;
  shared->case_path = data->info.path;

  if (qEnvironmentVariableIsEmpty("DISPLAY") && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
      qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
  }
  int argc = 1;
  char name[] = "attnscope-cli";
  char* argv[] = {name, nullptr};
  QApplication app(argc, argv);
  QCoreApplication::setOrganizationName(QStringLiteral("attnscope"));  // the GUI's config folder
  QCoreApplication::setApplicationName(QStringLiteral("attnscope"));   // (fallback sidecars)
  return render(shared, view, *out, !args.flag("no-markers"), findings);
}

}  // namespace attnscope
