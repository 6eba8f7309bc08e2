// attnscope GUI entry point: parses the command line, opens the window and, with
// --screenshot, saves a PNG of the window after the first compute and quits.
#include <QApplication>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "app/gui/AnalysisController.h"
#include "app/gui/AppOptions.h"
#include "app/gui/ComputeWorker.h"
#include "app/gui/FindingNavigator.h"
#include "app/gui/GuiBench.h"
#include "app/gui/MainWindow.h"
#include "app/gui/ScanController.h"
#include "app/gui/SessionContext.h"
#include "app/gui/StepperController.h"
#include "core/io/dump_probe.h"

namespace {

constexpr int kScreenshotDelayMs = 600;
constexpr int kScreenshotTimeoutMs = 120000;

// Whether the heatmaps show the selected case, batch and head (a selection change posts its
// compute, so an idle worker alone does not say so).
bool showsSelection(const attnscope::SessionContext& context) {
  const auto r = context.result();
  return r && r->case_path == context.casePath().toStdString() &&
         r->request.batch == context.batch() && r->request.head == context.head();
}

// Saves the window as a PNG once the stepper, the case scan and the head compute are idle, the
// heatmaps show the selection, the findings of the current settings are listed and an opened
// dump has led to its first error, then quits (exit 1 on failure).
void grabWhenIdle(attnscope::MainWindow& window, const QString& path) {
  if (window.stepper()->busy() || window.scans()->busy() || window.worker()->busy() ||
      !showsSelection(*window.context()) || !window.analysis()->summaryCurrent() ||
      window.findingNavigator()->leading()) {
    QTimer::singleShot(kScreenshotDelayMs, &window,
                       [&window, path] { grabWhenIdle(window, path); });
    return;
  }
  const bool saved = window.grab().save(path, "PNG");
  std::fprintf(stderr, "attnscope: %s %s\n", saved ? "saved" : "could not save", qPrintable(path));
  QApplication::exit(saved ? 0 : 1);
}

// Grabs the window once the first result has been drawn.
void screenshotWhenReady(attnscope::MainWindow& window, const QString& path) {
  QObject::connect(window.worker(), &attnscope::ComputeWorker::finished, &window, [&window, path] {
    QTimer::singleShot(kScreenshotDelayMs, &window,
                       [&window, path] { grabWhenIdle(window, path); });
  });
  QTimer::singleShot(kScreenshotTimeoutMs, &window, [] {
    std::fprintf(stderr, "attnscope: no result to screenshot after %d s\n",
                 kScreenshotTimeoutMs / 1000);
    QApplication::exit(1);
  });
}

// `--bench-gui [RUNS [SEQLEN]]` as the first argument runs the GUI bench (offscreen unless a
// platform is set) instead of the window.
int benchMain(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  attnscope::GuiBenchOptions options;
  if (argc > 2) options.runs = std::max(1, std::atoi(argv[2]));
  if (argc > 3) options.seqlen = std::max(1, std::atoi(argv[3]));
  return attnscope::runGuiBench(options);
}

// Whether the command line asks for the help text (answered without a display).
bool wantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) return true;
  }
  return false;
}

}  // namespace

// `--bench-open [SEQLEN]`: the open-to-first-heatmap bench of a real-size layer.
int openBenchMain(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  return attnscope::runOpenBench(argc > 2 ? std::max(64, std::atoi(argv[2])) : 4096);
}

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--bench-gui") == 0) return benchMain(argc, argv);
  if (argc > 1 && std::strcmp(argv[1], "--bench-open") == 0) return openBenchMain(argc, argv);
  if (wantsHelp(argc, argv)) {
    const QCoreApplication core(argc, argv);  // names the program in the usage line
    std::fputs(qPrintable(attnscope::commandLineHelp()), stdout);
    return 0;
  }
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("attnscope"));
  QApplication::setApplicationName(QStringLiteral("attnscope"));
  const attnscope::AppOptions options = attnscope::parseCommandLine(app.arguments());
  if (!options.error.isEmpty()) {
    std::fprintf(stderr, "attnscope: %s\n", qPrintable(options.error));
    return 2;
  }
  if (options.probeTimeout) attnscope::set_probe_timeout(*options.probeTimeout);
  attnscope::MainWindow window;
  if (!options.screenshot.isEmpty()) screenshotWhenReady(window, options.screenshot);
  window.show();
  // The files open in the background once the event loop runs; a screenshot of a file that
  // cannot be opened fails with exit code 2.
  const bool screenshot = !options.screenshot.isEmpty();
  window.applyOptionsLater(options, [screenshot](bool opened) {
    if (!opened && screenshot) QApplication::exit(2);
  });
  return app.exec();
}
