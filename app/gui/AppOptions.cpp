// Command-line parsing of the GUI (see AppOptions.h).
#include "app/gui/AppOptions.h"

#include <QCommandLineParser>
#include <QFileInfo>

#include "core/io/dump_probe.h"

namespace attnscope {
namespace {

struct Parser {
  QCommandLineParser parser;
  QCommandLineOption precision{"precision", "Emulated precision: fp32, fp16 or bf16.", "P"};
  QCommandLineOption mode{"mode", "Kernel emulated: fused or unfused.", "MODE"};
  QCommandLineOption scale{"scale", "Softmax scale (default: the case's).", "SCALE"};
  QCommandLineOption batch{"batch", "Batch index to show.", "B"};
  QCommandLineOption head{"head", "Head index to show.", "H"};
  QCommandLineOption matrix{
      "matrix",
      QStringLiteral("Heatmap tab to show: %1.").arg(QString::fromStdString(head_view_names(", "))),
      "NAME"};
  QCommandLineOption screenshot{
      "screenshot", "Save a PNG of the window after the first compute and quit.", "PNG"};
  QCommandLineOption stepper{"stepper",
                             "Show the backward stepper at step N, or at the first step that "
                             "makes a value non-finite ('nonfinite').",
                             "N|nonfinite"};
  QCommandLineOption probeTimeout{
      "probe-timeout",
      "Seconds the child process that test-reads a dump may run before it counts as a hang "
      "(default 120, or $ATTNSCOPE_PROBE_TIMEOUT).",
      "SECONDS"};

  Parser() {
    parser.setApplicationDescription(
        "attnscope: visual debugger for fused attention\n"
        "attnscope --bench-gui [RUNS [SEQLEN]]: slider-to-render latency at S=SEQLEN (default "
        "2048), D=64 (offscreen)\n"
        "attnscope --bench-open [SEQLEN]: open-to-first-heatmap time and peak memory of a "
        "B=1 H=32 Hkv=8 D=128 bf16 causal layer (default S=4096, offscreen)");
    parser.addHelpOption();
    parser.addOptions(
        {precision, mode, scale, batch, head, matrix, screenshot, stepper, probeTimeout});
    parser.addPositionalArgument(
        "FILE[::CASE]",
        "Dump files or run folders (every dump in it, one per rank) to open; ::CASE selects a "
        "case.",
        "[FILE[::CASE]...]");
  }
};

std::optional<int> parseIndex(const QString& text) {
  bool ok = false;
  const int v = text.toInt(&ok);
  return ok && v >= 0 ? std::optional(v) : std::nullopt;
}

}  // namespace

OpenTarget parseOpenTarget(const QString& argument) {
  const int split = argument.lastIndexOf(QStringLiteral("::"));
  if (split < 0 || (QFileInfo::exists(argument) && !QFileInfo::exists(argument.left(split)))) {
    return {argument, QString()};
  }
  QString casePath = argument.mid(split + 2);
  if (!casePath.isEmpty() && !casePath.startsWith(QLatin1Char('/'))) casePath.prepend('/');
  return {argument.left(split), casePath};
}

AppOptions parseCommandLine(const QStringList& arguments) {
  Parser p;
  AppOptions out;
  if (!p.parser.parse(arguments)) {
    out.error = p.parser.errorText();
    return out;
  }
  for (const QString& a : p.parser.positionalArguments()) out.targets << parseOpenTarget(a);
  if (p.parser.isSet(p.precision)) {
    const QString v = p.parser.value(p.precision).toLower();
    if (v == "fp32")
      out.precision = Precision::f32;
    else if (v == "fp16")
      out.precision = Precision::f16;
    else if (v == "bf16")
      out.precision = Precision::bf16;
    else
      out.error = QStringLiteral("--precision: '%1' is not fp32, fp16 or bf16").arg(v);
  }
  if (p.parser.isSet(p.mode)) {
    const QString v = p.parser.value(p.mode).toLower();
    if (v == "fused")
      out.mode = Mode::fused;
    else if (v == "unfused")
      out.mode = Mode::unfused;
    else
      out.error = QStringLiteral("--mode: '%1' is not fused or unfused").arg(v);
  }
  if (p.parser.isSet(p.scale)) {
    bool ok = false;
    const double v = p.parser.value(p.scale).toDouble(&ok);
    if (ok && v > 0)
      out.scale = v;
    else
      out.error = QStringLiteral("--scale: expected a number > 0");
  }
  for (auto [option, target] : {std::pair{&p.batch, &out.batch}, std::pair{&p.head, &out.head}}) {
    if (!p.parser.isSet(*option)) continue;
    const auto v = parseIndex(p.parser.value(*option));
    if (v)
      *target = *v;
    else
      out.error = QStringLiteral("--%1: expected an index >= 0").arg(option->names().front());
  }
  if (p.parser.isSet(p.matrix)) {
    const QString name = p.parser.value(p.matrix);
    out.matrix = head_view_named(name.toStdString());
    if (!out.matrix) {
      out.error = QStringLiteral("--matrix: '%1' is not one of %2")
                      .arg(name, QString::fromStdString(head_view_names(", ")));
    }
  }
  if (p.parser.isSet(p.stepper)) {
    const QString v = p.parser.value(p.stepper).toLower();
    const auto n = parseIndex(v);
    if (v == QLatin1String("nonfinite"))
      out.stepper = -1;
    else if (n)
      out.stepper = *n;
    else
      out.error = QStringLiteral("--stepper: expected a step >= 0 or 'nonfinite'");
  }
  if (p.parser.isSet(p.probeTimeout)) {
    const QString v = p.parser.value(p.probeTimeout);
    out.probeTimeout = parse_probe_timeout(v.toStdString());
    if (!out.probeTimeout) {
      out.error =
          QStringLiteral("--probe-timeout: '%1' is not a number of seconds > 0 (at most 1e6)")
              .arg(v);
    }
  }
  out.screenshot = p.parser.value(p.screenshot);
  return out;
}

QString commandLineHelp() {
  return Parser().parser.helpText();
}

}  // namespace attnscope
