// GPU bench points, their ratios and targets, as JSON and as a table (see gpu_bench.h).
// Every GPU variant waits for its kernels in forward() / backward(), so the wall-clock medians
// of bench_timing bracket the device work.
#include "gpu_bench.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "core/kernel_registry.h"

namespace attnscope::bench {
namespace {

double tflops(const BenchPoint& p, const VariantTiming& t, Phase ph) {
  return flops_of(p, ph) / (ms_of(t, ph) * 1e9);
}

// DESIGN §7 / issue 8 targets; the speed ones apply at S = 8192, D = 128.
std::vector<Target> targets(const PointResult& r) {
  std::vector<Target> out;
  if (r.point.seqlen == 8192 && r.point.head_dim == 128) {
    out.push_back({"own_fwd_vs_sdpa_flash", speedup(r, kGpuOwn, kGpuFlash, Phase::fwd), 0.5, true});
    out.push_back({"own_bwd_vs_sdpa_flash", speedup(r, kGpuOwn, kGpuFlash, Phase::bwd), 0.5, true});
  }
  out.push_back({"instrumentation_overhead_fwd_bwd",
                 speedup(r, kGpuOwn, kGpuOwnInstr, Phase::fwd_bwd) - 1, 0.05, false});
  return out;
}

std::vector<BenchPoint> gpu_grid(bool quick) {
  std::vector<BenchPoint> points;
  const std::vector<int64_t> seqlens =
      quick ? std::vector<int64_t>{256} : std::vector<int64_t>{2048, 8192};
  const std::vector<int64_t> dims =
      quick ? std::vector<int64_t>{64} : std::vector<int64_t>{64, 128};
  for (int64_t s : seqlens) {
    for (int64_t d : dims) {
      for (bool causal : {false, true}) {
        points.push_back({std::max<int64_t>(1, 16384 / s), 16, s, d, causal, Precision::bf16});
      }
    }
  }
  return points;
}

void ratios_json(std::ostream& os, const PointResult& r, const char* own) {
  const char* others[] = {kGpuFlash, kGpuEfficient, kGpuCudnn};
  for (size_t i = 0; i < 3; ++i) {
    os << (i ? ", " : "") << "\"" << own << "_vs_" << others[i] << "\": {";
    for (Phase ph : kPhases) {
      os << (ph == Phase::fwd ? "" : ", ") << "\"" << phase_name(ph)
         << "\": " << json_number(speedup(r, own, others[i], ph));
    }
    os << "}";
  }
}

void point_json(std::ostream& os, const PointResult& r) {
  const BenchPoint& p = r.point;
  os << "      {\"batch\": " << p.batch << ", \"heads\": " << p.heads
     << ", \"seqlen\": " << p.seqlen << ", \"head_dim\": " << p.head_dim
     << ", \"causal\": " << (p.causal ? "true" : "false") << ", \"precision\": \""
     << precision_name(p.precision)
     << "\", \"tflop\": {\"fwd\": " << json_number(fwd_flops(p) / 1e12)
     << ", \"bwd\": " << json_number(bwd_flops(p) / 1e12) << "},\n";
  os << "       \"variants\": [\n";
  for (size_t i = 0; i < r.timings.size(); ++i) {
    const VariantTiming& t = r.timings[i];
    os << "         {\"label\": " << json_quoted(t.label)
       << ", \"ok\": " << (t.ok ? "true" : "false");
    if (t.ok) {
      os << ", \"reps\": " << t.reps;
      for (Phase ph : kPhases)
        os << ", \"" << phase_name(ph) << "_ms\": " << json_number(ms_of(t, ph));
      for (Phase ph : kPhases)
        os << ", \"" << phase_name(ph) << "_tflops\": " << json_number(tflops(p, t, ph));
    } else {
      os << ", \"reason\": " << json_quoted(t.reason);
    }
    os << "}" << (i + 1 < r.timings.size() ? "," : "") << "\n";
  }
  os << "       ],\n       \"ratios\": {";
  ratios_json(os, r, kGpuOwn);
  os << ",\n                  ";
  ratios_json(os, r, kGpuOwnInstr);
  os << "},\n       \"targets\": {";
  const std::vector<Target> ts = targets(r);
  for (size_t i = 0; i < ts.size(); ++i) {
    os << (i ? ", " : "") << "\"" << ts[i].name << "\": {\"value\": " << json_number(ts[i].value)
       << ", \"" << (ts[i].at_least ? "min" : "max") << "\": " << json_number(ts[i].limit)
       << ", \"met\": " << (target_met(ts[i]) ? "true" : "false") << "}";
  }
  os << "}}";
}

}  // namespace

GpuReport run_gpu_bench(const BenchSettings& settings, bool quick) {
  GpuReport report;
  const KernelVariant* own = find_variant(kGpuOwn);
  if (own == nullptr) {
    report.skipped = "no CUDA device (or built without nvcc): GPU part skipped";
    std::fprintf(stderr, "attnscope-bench: %s\n", report.skipped.c_str());
    return report;
  }
  report.ran = true;
  report.device = own->description;
  std::vector<std::pair<const KernelVariant*, bool>> runs = {{own, false}, {own, true}};
  for (const char* name : {kGpuFlash, kGpuEfficient, kGpuCudnn}) {
    if (const KernelVariant* v = find_variant(name)) runs.push_back({v, false});
  }
  for (const BenchPoint& point : gpu_grid(quick)) {
    std::fprintf(stderr, "attnscope-bench: GPU B=%lld H=%lld S=%lld D=%lld bf16 %s\n",
                 static_cast<long long>(point.batch), static_cast<long long>(point.heads),
                 static_cast<long long>(point.seqlen), static_cast<long long>(point.head_dim),
                 point.causal ? "causal" : "full");
    const BenchInputs inputs = make_bench_inputs(point);
    std::vector<TimingPlan> plan;
    for (const auto& [variant, instrument] : runs)
      plan.push_back({variant, instrument, point, &inputs});
    report.points.push_back({point, time_interleaved(plan, settings)});
  }
  return report;
}

void write_gpu_json(std::ostream& os, const GpuReport& report) {
  os << "  \"gpu\": {\"ran\": " << (report.ran ? "true" : "false");
  if (!report.ran) {
    os << ", \"skipped\": " << json_quoted(report.skipped) << "},\n";
    return;
  }
  os << ", \"device\": " << json_quoted(report.device)
     << ", \"flops\": \"TFLOP/s: fwd 4*B*H*Sq*Sk*D, bwd 2.5x fwd, halved if causal\""
     << ",\n    \"points\": [\n";
  for (size_t i = 0; i < report.points.size(); ++i) {
    point_json(os, report.points[i]);
    os << (i + 1 < report.points.size() ? ",\n" : "\n");
  }
  os << "    ]},\n";
}

void write_gpu_table(std::ostream& os, const GpuReport& report) {
  if (!report.ran) {
    os << "\nGPU: " << report.skipped << "\n";
    return;
  }
  char line[256];
  os << "\nGPU: " << report.device << " (TFLOP/s)\n";
  for (const PointResult& r : report.points) {
    const BenchPoint& p = r.point;
    std::snprintf(line, sizeof line, "\nB=%lld H=%lld S=%lld D=%lld bf16 %s\n",
                  static_cast<long long>(p.batch), static_cast<long long>(p.heads),
                  static_cast<long long>(p.seqlen), static_cast<long long>(p.head_dim),
                  p.causal ? "causal" : "non-causal");
    os << line;
    for (const VariantTiming& t : r.timings) {
      if (!t.ok) {
        os << "  " << t.label << ": not run: " << t.reason << "\n";
        continue;
      }
      std::snprintf(line, sizeof line,
                    "  %-22s fwd %8.3f ms %7.1f  bwd %8.3f ms %7.1f  f+b %8.3f ms %7.1f\n",
                    t.label.c_str(), t.time.fwd_ms, tflops(p, t, Phase::fwd), t.time.bwd_ms,
                    tflops(p, t, Phase::bwd), t.time.fwd_bwd_ms, tflops(p, t, Phase::fwd_bwd));
      os << line;
    }
    for (const Target& t : targets(r)) {
      std::snprintf(
          line, sizeof line, "  %-34s %8s  (%s %s)  %s\n", t.name, json_number(t.value).c_str(),
          t.at_least ? ">=" : "<=", json_number(t.limit).c_str(), target_met(t) ? "met" : "MISSED");
      os << line;
    }
  }
}

}  // namespace attnscope::bench
