// Command line of the attnscope GUI: `attnscope [options] FILE[::CASE]...` plus settings (and a
// stepper position) to start with and --screenshot to grab the window after the first compute
// and quit.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <optional>

#include "core/view/head_view.h"
#include "kernels/attn_params.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

// "FILE::CASE" -> {FILE, CASE}; a plain FILE leaves casePath empty. The split is at the last
// "::" and only when the part before it names an existing file (or the whole does not).
struct OpenTarget {
  QString file;
  QString casePath;
};
OpenTarget parseOpenTarget(const QString& argument);

struct AppOptions {
  QList<OpenTarget> targets;
  std::optional<Precision> precision;
  std::optional<Mode> mode;
  std::optional<double> scale;
  int batch = -1, head = -1;       // -1: keep the default (0)
  std::optional<HeadView> matrix;  // heatmap tab to show
  QString screenshot;              // PNG path: grab the window after the first compute, then quit
  // --stepper: the backward stepper's position to show; -1: the first non-finite step.
  std::optional<int64_t> stepper;
  // --probe-timeout: seconds one probe run of a dump may take (set_probe_timeout; wins over
  // $ATTNSCOPE_PROBE_TIMEOUT).
  std::optional<double> probeTimeout;
  QString error;  // non-empty when the command line is invalid
};

// Parses the arguments (argv[0] first). Unknown options or values set `error`.
AppOptions parseCommandLine(const QStringList& arguments);

// The usage text printed by --help.
QString commandLineHelp();

}  // namespace attnscope
