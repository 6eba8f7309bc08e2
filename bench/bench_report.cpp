// JSON and table rendering of attnscope-bench results, with the ratios and DESIGN §7 targets.
#include "bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

namespace attnscope::bench {
namespace {

double gflops(const BenchPoint& p, const VariantTiming& t, Phase ph) {
  return flops_of(p, ph) / (ms_of(t, ph) * 1e6);
}

// Extra time of the instrumented run: the median over rounds of t(instr) / t(plain) - 1.
double overhead(const PointResult& r, Phase ph) {
  const VariantTiming* plain = find_timing(r, kOwn);
  const VariantTiming* instr = find_timing(r, kOwnInstr);
  if (plain == nullptr || instr == nullptr) return NAN;
  const int i = static_cast<int>(ph);
  return median_paired_ratio(instr->samples[i], plain->samples[i]) - 1;
}

// The fp32 point of the same shape as bf16 point r, if the run has one.
const PointResult* fp32_sibling(const BenchReport& report, const PointResult& r) {
  for (const PointResult& o : report.points) {
    const BenchPoint &a = o.point, &b = r.point;
    if (a.precision == Precision::f32 && a.batch == b.batch && a.heads == b.heads &&
        a.seqlen == b.seqlen && a.head_dim == b.head_dim && a.causal == b.causal) {
      return &o;
    }
  }
  return nullptr;
}

// Own forward GFLOP/s as a fraction of LibTorch's sgemm rate.
double fraction_of_roof(const BenchReport& report, const PointResult& r) {
  const VariantTiming* own = find_timing(r, kOwn);
  return own && report.roof.gflops > 0 ? gflops(r.point, *own, Phase::fwd) / report.roof.gflops
                                       : NAN;
}

std::vector<Target> targets(const BenchReport& report, const PointResult& r) {
  std::vector<Target> out = {
      {"own_instr_fwd_bwd_vs_torch_flash", speedup(r, kOwnInstr, kTorchFlash, Phase::fwd_bwd), 1.2,
       true},
      {"own_instr_fwd_bwd_vs_torch_math", speedup(r, kOwnInstr, kTorchMath, Phase::fwd_bwd), 2.0,
       true},
      {"own_fwd_fraction_of_sgemm", fraction_of_roof(report, r), 0.6, true},
      {"instrumentation_overhead_fwd_bwd", overhead(r, Phase::fwd_bwd), 0.05, false}};
  if (r.point.precision == Precision::bf16) {
    const PointResult* f32 = fp32_sibling(report, r);
    const VariantTiming* mine = find_timing(r, kOwnInstr);
    const VariantTiming* theirs = f32 ? find_timing(*f32, kOwnInstr) : nullptr;
    // Median over rounds of t(fp32) / t(bf16): main.cpp times both in the same rounds.
    const int i = static_cast<int>(Phase::fwd_bwd);
    out.push_back({"own_instr_fwd_bwd_bf16_vs_own_fp32",
                   mine && theirs ? median_paired_ratio(theirs->samples[i], mine->samples[i]) : NAN,
                   1.3, true});
  }
  return out;
}

// DESIGN §7: the pooled P heatmap (the one that needs the softmax statistics) costs at most
// 1.5 forward passes and 64 MB.
constexpr double kHeatmapPassesMax = 1.5, kHeatmapMbMax = 64;

const HeatmapTiming* heatmap_target_timing(const HeatmapResult& h) {
  for (const HeatmapTiming& t : h.timings) {
    if (t.matrices == "p") return &t;
  }
  return nullptr;
}

bool heatmap_met(const HeatmapTiming& t) {
  return t.forward_passes <= kHeatmapPassesMax && t.peak_extra_bytes / 1048576.0 <= kHeatmapMbMax;
}

void heatmap_json(std::ostream& os, const HeatmapResult& h) {
  os << "  \"pooled_heatmap\": {\"seqlen\": " << h.point.seqlen
     << ", \"head_dim\": " << h.point.head_dim << ", \"pixels\": " << h.point.pixels
     << ", \"precision\": \"fp32\", \"forward_ms\": " << json_number(h.forward_ms)
     << ",\n    \"matrices\": [";
  for (size_t i = 0; i < h.timings.size(); ++i) {
    const HeatmapTiming& t = h.timings[i];
    os << (i ? ", " : "") << "{\"matrices\": \"" << t.matrices
       << "\", \"ms\": " << json_number(t.ms)
       << ", \"forward_passes\": " << json_number(t.forward_passes)
       << ", \"peak_extra_mb\": " << json_number(t.peak_extra_bytes / 1048576.0) << "}";
  }
  os << "]";
  if (const HeatmapTiming* t = heatmap_target_timing(h)) {
    os << ",\n    \"target\": {\"matrices\": \"p\", \"forward_passes_max\": "
       << json_number(kHeatmapPassesMax)
       << ", \"peak_extra_mb_max\": " << json_number(kHeatmapMbMax)
       << ", \"met\": " << (heatmap_met(*t) ? "true" : "false") << "}";
  }
  os << "},\n";
}

void heatmap_table(std::ostream& os, const HeatmapResult& h) {
  char line[160];
  std::snprintf(line, sizeof line,
                "\npooled %lldx%lld heatmap of one head, S=%lld D=%lld fp32 (forward %.1f ms)\n",
                static_cast<long long>(h.point.pixels), static_cast<long long>(h.point.pixels),
                static_cast<long long>(h.point.seqlen), static_cast<long long>(h.point.head_dim),
                h.forward_ms);
  os << line;
  for (const HeatmapTiming& t : h.timings) {
    std::snprintf(line, sizeof line, "  %-10s %10.1f ms %6.2f forward passes %8.1f MB peak extra\n",
                  t.matrices.c_str(), t.ms, t.forward_passes, t.peak_extra_bytes / 1048576.0);
    os << line;
  }
  if (const HeatmapTiming* t = heatmap_target_timing(h)) {
    std::snprintf(line, sizeof line, "  target (p): <= %.1f forward passes, <= %.0f MB  %s\n",
                  kHeatmapPassesMax, kHeatmapMbMax, heatmap_met(*t) ? "met" : "MISSED");
    os << line;
  }
}

void ratio_json(std::ostream& os, const char* name, const PointResult& r, const char* own,
                const char* other) {
  os << "\"" << name << "\": {";
  for (Phase ph : kPhases) {
    os << (ph == Phase::fwd ? "" : ", ") << "\"" << phase_name(ph)
       << "\": " << json_number(speedup(r, own, other, ph));
  }
  os << "}";
}

void point_json(std::ostream& os, const BenchReport& report, const PointResult& r) {
  const BenchPoint& p = r.point;
  os << "    {\"batch\": " << p.batch << ", \"heads\": " << p.heads << ", \"seqlen\": " << p.seqlen
     << ", \"head_dim\": " << p.head_dim << ", \"causal\": " << (p.causal ? "true" : "false")
     << ", \"precision\": \"" << precision_name(p.precision)
     << "\",\n     \"gflop\": {\"fwd\": " << json_number(fwd_flops(p) / 1e9)
     << ", \"bwd\": " << json_number(bwd_flops(p) / 1e9) << "},\n";
  os << "     \"variants\": [\n";
  for (size_t i = 0; i < r.timings.size(); ++i) {
    const VariantTiming& t = r.timings[i];
    os << "       {\"label\": " << json_quoted(t.label)
       << ", \"variant\": " << json_quoted(t.variant)
       << ", \"instrumented\": " << (t.instrumented ? "true" : "false")
       << ", \"ok\": " << (t.ok ? "true" : "false");
    if (t.ok) {
      os << ", \"reps\": " << t.reps;
      for (Phase ph : kPhases)
        os << ", \"" << phase_name(ph) << "_ms\": " << json_number(ms_of(t, ph));
      for (Phase ph : kPhases) {
        os << ", \"" << phase_name(ph) << "_gflops\": " << json_number(gflops(p, t, ph));
      }
    } else {
      os << ", \"reason\": " << json_quoted(t.reason);
    }
    os << "}" << (i + 1 < r.timings.size() ? "," : "") << "\n";
  }
  os << "     ],\n     \"ratios\": {";
  ratio_json(os, "own_vs_torch_math", r, kOwn, kTorchMath);
  os << ", ";
  ratio_json(os, "own_vs_torch_flash", r, kOwn, kTorchFlash);
  os << ",\n                ";
  ratio_json(os, "own_instr_vs_torch_math", r, kOwnInstr, kTorchMath);
  os << ", ";
  ratio_json(os, "own_instr_vs_torch_flash", r, kOwnInstr, kTorchFlash);
  os << ",\n                \"instrumentation_overhead\": {";
  for (Phase ph : kPhases) {
    os << (ph == Phase::fwd ? "" : ", ") << "\"" << phase_name(ph)
       << "\": " << json_number(overhead(r, ph));
  }
  os << "}},\n     \"targets\": {";
  const std::vector<Target> ts = targets(report, r);
  for (size_t i = 0; i < ts.size(); ++i) {
    os << (i ? ", " : "") << "\"" << ts[i].name << "\": {\"value\": " << json_number(ts[i].value)
       << ", \"" << (ts[i].at_least ? "min" : "max") << "\": " << json_number(ts[i].limit)
       << ", \"met\": " << (target_met(ts[i]) ? "true" : "false") << "}";
  }
  os << "}}";
}

}  // namespace

const char* phase_name(Phase ph) {
  return ph == Phase::fwd ? "fwd" : ph == Phase::bwd ? "bwd" : "fwd_bwd";
}

double ms_of(const VariantTiming& t, Phase ph) {
  return ph == Phase::fwd ? t.time.fwd_ms : ph == Phase::bwd ? t.time.bwd_ms : t.time.fwd_bwd_ms;
}

double flops_of(const BenchPoint& p, Phase ph) {
  return ph == Phase::fwd   ? fwd_flops(p)
         : ph == Phase::bwd ? bwd_flops(p)
                            : fwd_flops(p) + bwd_flops(p);
}

const VariantTiming* find_timing(const PointResult& r, const std::string& label) {
  for (const VariantTiming& t : r.timings) {
    if (t.label == label && t.ok) return &t;
  }
  return nullptr;
}

double speedup(const PointResult& r, const char* own, const char* other, Phase ph) {
  const VariantTiming* a = find_timing(r, own);
  const VariantTiming* b = find_timing(r, other);
  return a && b ? ms_of(*b, ph) / ms_of(*a, ph) : NAN;
}

std::string json_number(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

std::string json_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out + "\"";
}

bool target_met(const Target& t) {
  return t.at_least ? t.value >= t.limit : t.value <= t.limit;
}

void write_json(std::ostream& os, const BenchReport& report) {
  const BenchSettings& s = report.settings;
  os << "{\n  \"bench\": \"attnscope-bench\",\n  \"threads\": " << s.threads
     << ", \"reps\": " << s.reps << ", \"warmup\": " << s.warmup
     << ", \"phase_budget_s\": " << json_number(s.phase_budget_s)
     << ",\n  \"timing\": \"median wall time per phase over reps (fewer, >= 3, once a phase took "
        "phase_budget_s); bwd timed after an untimed fwd\""
     << ",\n  \"flops\": \"fwd 4*B*H*Sq*Sk*D, bwd 2.5x fwd, halved if causal\""
     << ",\n  \"ratios\": \"speedup = other's time / own time (> 1: ours is faster); "
        "instrumentation_overhead = median over rounds of t(instr) / t(plain) - 1; "
        "own_instr_fwd_bwd_bf16_vs_own_fp32 = median over rounds of t(fp32) / t(bf16), both "
        "precisions of a shape timed in the same rounds\""
     << ",\n  \"cpu_isa\": " << json_quoted(report.cpu_isa) << ", \"cpu_isas_available\": [";
  for (size_t i = 0; i < report.cpu_isas_available.size(); ++i) {
    os << (i ? ", " : "") << json_quoted(report.cpu_isas_available[i]);
  }
  os << "],\n  \"omp_wait_policy\": " << json_quoted(report.omp_wait_policy)
     << ",\n  \"torch_sgemm\": {\"n\": " << report.roof.n
     << ", \"gflops\": " << json_number(report.roof.gflops)
     << ", \"torch_cpu_isa\": " << json_quoted(report.roof.torch_cpu_isa) << "},\n";
  if (report.has_heatmap) heatmap_json(os, report.heatmap);
  os << report.gpu_json;
  os << "  \"points\": [\n";
  for (size_t i = 0; i < report.points.size(); ++i) {
    point_json(os, report, report.points[i]);
    os << (i + 1 < report.points.size() ? ",\n" : "\n");
  }
  os << "  ]\n}\n";
}

void write_table(std::ostream& os, const BenchReport& report) {
  char line[256];
  os << "attnscope-bench: " << report.settings.threads << " threads, median of up to "
     << report.settings.reps << " reps (GFLOP/s: fwd 4*B*H*S*S*D, bwd 2.5x, halved if causal)\n"
     << "CPU kernels on " << report.cpu_isa << "; LibTorch (" << report.roof.torch_cpu_isa
     << ") sgemm " << report.roof.n << "^3: " << json_number(report.roof.gflops)
     << " GFLOP/s; OMP_WAIT_POLICY=" << report.omp_wait_policy << "\n";
  for (const PointResult& r : report.points) {
    const BenchPoint& p = r.point;
    std::snprintf(line, sizeof line, "\nB=%lld H=%lld S=%lld D=%lld %s %s\n",
                  static_cast<long long>(p.batch), static_cast<long long>(p.heads),
                  static_cast<long long>(p.seqlen), static_cast<long long>(p.head_dim),
                  precision_name(p.precision), p.causal ? "causal" : "non-causal");
    os << line;
    std::snprintf(line, sizeof line, "  %-18s %10s %8s %10s %8s %10s %8s %5s\n", "variant",
                  "fwd ms", "GF/s", "bwd ms", "GF/s", "f+b ms", "GF/s", "reps");
    os << line;
    for (const VariantTiming& t : r.timings) {
      if (!t.ok) {
        os << "  " << t.label << ": not run: " << t.reason << "\n";
        continue;
      }
      std::snprintf(line, sizeof line, "  %-18s %10.2f %8.1f %10.2f %8.1f %10.2f %8.1f %5d\n",
                    t.label.c_str(), t.time.fwd_ms, gflops(p, t, Phase::fwd), t.time.bwd_ms,
                    gflops(p, t, Phase::bwd), t.time.fwd_bwd_ms, gflops(p, t, Phase::fwd_bwd),
                    t.reps);
      os << line;
    }
    for (const Target& t : targets(report, r)) {
      std::snprintf(
          line, sizeof line, "  %-34s %8s  (%s %s)  %s\n", t.name, json_number(t.value).c_str(),
          t.at_least ? ">=" : "<=", json_number(t.limit).c_str(), target_met(t) ? "met" : "MISSED");
      os << line;
    }
  }
  if (report.has_heatmap) heatmap_table(os, report.heatmap);
  os << report.gpu_table;
}

}  // namespace attnscope::bench
