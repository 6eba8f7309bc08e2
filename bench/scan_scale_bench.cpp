// The real-size scan benchmark (see scan_scale_bench.h). Peak memory per phase: the kernel's
// high-water mark (VmHWM) is reset before each phase through /proc/self/clear_refs ("5").
#include "scan_scale_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <string>

#include "core/analysis/case_analysis.h"
#include "core/analysis/reference64.h"
#include "core/case_inputs.h"
#include "core/memory_budget.h"
#include "core/torch_layer.h"

namespace attnscope::bench {
namespace {

// Targets of issue 43 (and issue 40 item 7 for the window).
constexpr double kScanOverStep = 2.0;
constexpr double kScanPeakGb = 0.7, kWindowPeakGb = 1.5, kFirstHeatmapS = 2.0;

// Peak resident memory since the last reset_peak(), in GB (VmHWM of /proc/self/status).
double peak_gb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / (1024.0 * 1024.0);
  }
  return 0;
}

// Whether the high-water mark could be reset (Linux >= 4.0); else peaks are since the start.
bool reset_peak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  return static_cast<bool>(clear.flush());
}

// The window's figures from `attnscope --bench-open S` next to this binary (build tree:
// ../app/attnscope), run offscreen: seconds from the case read to the first heatmap, peak GB;
// negative when the window is not there.
struct WindowFigures {
  double first_heatmap_s = -1, peak_gb = -1;
};
WindowFigures window_figures(int64_t seqlen) {
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {};
  std::string dir(self, static_cast<size_t>(n));
  dir.erase(dir.rfind('/'));
  for (const std::string& app : {dir + "/attnscope", dir + "/../app/attnscope"}) {
    if (access(app.c_str(), X_OK) != 0) continue;
    const std::string command = "QT_QPA_PLATFORM=offscreen '" + app + "' --bench-open " +
                                std::to_string(seqlen) + " 2>/dev/null";
    FILE* pipe = popen(command.c_str(), "r");
    if (pipe == nullptr) return {};
    WindowFigures w;
    char line[512];
    while (std::fgets(line, sizeof line, pipe) != nullptr) {
      double total = 0, after = 0, before = 0, peak = 0;
      if (std::sscanf(line, "first heatmap drawn %lf ms (%lf ms after", &total, &after) == 2) {
        w.first_heatmap_s = after / 1000.0;
      }
      if (std::sscanf(line, "peak resident memory %lf MB (%lf MB before", &peak, &before) == 2) {
        w.peak_gb = peak / 1024.0;
      }
    }
    pclose(pipe);
    return w;
  }
  return {};
}

// The scan's fp64 reference alone (forward and backward: what checks the recorded outputs):
// seconds and useful GFLOP/s, 2 D per visible (query, key) pair and product, 2 products
// forward and 5 backward; negative when the inputs cannot be made.
struct ReferenceFigures {
  double seconds = -1, gflops = -1;
};
ReferenceFigures reference_figures(const CaseData& data, int threads) {
  const Result<CaseInputs> inputs = make_case_inputs(data, RunChoice{});
  if (!inputs) return {};
  const auto start = std::chrono::steady_clock::now();
  compute_reference64(*inputs, /*gradients=*/true, threads);
  ReferenceFigures f;
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const AttnParams& p = inputs->params;
  double pairs = 0;
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    pairs += static_cast<double>(p.causal ? std::min(p.seqlen_k, i + 1) : p.seqlen_k);
  }
  f.gflops = 14.0 * static_cast<double>(p.batch * p.heads * p.head_dim) * pairs / f.seconds / 1e9;
  return f;
}

void target(std::ostream& out, const char* what, double value, double limit, const char* unit) {
  char line[160];
  if (value < 0) {
    std::snprintf(line, sizeof line, "  %-26s %8s  not measured\n", what, "-");
  } else if (value <= limit) {
    std::snprintf(line, sizeof line, "  %-26s %7.2f%s  met\n", what, value, unit);
  } else {
    std::snprintf(line, sizeof line, "  %-26s %7.2f%s  missed by %.2f%s\n", what, value, unit,
                  value - limit, unit);
  }
  out << line;
}

}  // namespace

int run_scan_scale(std::ostream& out, const LayerShape& shape, int threads, int reps) {
  const bool resets = reset_peak();
  const int64_t seqlen = shape.seqlen;
  std::fprintf(stderr, "attnscope-bench: recording the layer with LibTorch (S=%lld)\n",
               static_cast<long long>(seqlen));
  Result<RecordedLayer> layer = record_torch_layer(shape, threads, reps);
  if (!layer) {
    std::fprintf(stderr, "attnscope-bench: %s\n", layer.error().describe().c_str());
    return 1;
  }
  const double step_peak = peak_gb();

  reset_peak();
  std::fprintf(stderr, "attnscope-bench: scanning it (default options)\n");
  AnalysisSettings settings;
  settings.threads = threads;
  const auto start = std::chrono::steady_clock::now();
  const Result<CaseAnalysis> scan = analyze_case(layer->data, settings);
  const double scan_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double scan_peak = peak_gb();
  if (!scan) {
    std::fprintf(stderr, "attnscope-bench: scan: %s\n", scan.error().describe().c_str());
    return 1;
  }
  int errors = 0, warnings = 0;
  for (const Finding& f : scan->findings) {
    errors += f.severity == Severity::error;
    warnings += f.severity == Severity::warning;
  }
  std::fprintf(stderr, "attnscope-bench: the fp64 reference alone\n");
  const ReferenceFigures reference = reference_figures(layer->data, threads);

  const LayerShape window_shape;
  const bool window_shaped =
      shape.heads == window_shape.heads && shape.kv_heads == window_shape.kv_heads;
  if (window_shaped) {
    std::fprintf(stderr, "attnscope-bench: the window (attnscope --bench-open, offscreen)\n");
  }
  const WindowFigures window = window_shaped ? window_figures(seqlen) : WindowFigures{};

  const double ratio = scan_s / layer->step_seconds;
  char text[512];
  std::snprintf(text, sizeof text,
                "attnscope-bench --scan-scale: B=1 H=%lld Hkv=%lld S=%lld D=128 bf16 causal (%s, "
                "torch %s), %s threads\n"
                "  the user's step (LibTorch fwd+bwd)  %7.2f s (median of %d)  peak %.2f GB\n"
                "  scan, default options              %7.2f s = %.2fx the step  peak %.2f GB  "
                "(%d errors, %d warnings; %s)\n",
                static_cast<long long>(shape.heads), static_cast<long long>(shape.kv_heads),
                static_cast<long long>(seqlen), layer->data.info.config.run.backend.c_str(),
                layer->data.info.config.run.torch_version.c_str(),
                threads > 0 ? std::to_string(threads).c_str() : "all", layer->step_seconds, reps,
                step_peak, scan_s, ratio, scan_peak, errors, warnings, scan->judged_under.c_str());
  out << text;
  std::snprintf(text, sizeof text,
                "  of which the fp64 reference        %7.2f s (fwd+bwd, bit-exact order: %.1f "
                "GFLOP/s)\n",
                reference.seconds, reference.gflops);
  out << text;
  if (window.first_heatmap_s >= 0) {
    std::snprintf(text, sizeof text,
                  "  window: first heatmap %.2f s after the case is read, peak %.2f GB\n",
                  window.first_heatmap_s, window.peak_gb);
    out << text;
  } else {
    out << (window_shaped ? "  window: not measured (attnscope not found next to attnscope-bench)\n"
                          : "  window: not measured for this shape\n");
  }
  if (!resets) out << "  (peaks since the start: /proc/self/clear_refs refused a reset)\n";
  out << "targets:\n";
  target(out, "scan <= 2.0x the step", ratio, kScanOverStep, "x");
  target(out, "scan peak <= 0.7 GB", scan_peak, kScanPeakGb, " GB");
  target(out, "window peak <= 1.5 GB", window.peak_gb, kWindowPeakGb, " GB");
  target(out, "first heatmap <= 2 s", window.first_heatmap_s, kFirstHeatmapS, " s");
  return 0;
}

}  // namespace attnscope::bench
