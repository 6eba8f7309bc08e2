// attnscope-bench: times our CPU fused attention (instrumentation off and on) against LibTorch
// math attention with autograd and PyTorch's CPU flash SDPA kernel, in one process and one run,
// through the kernel-variant registry (DESIGN §7); on a CUDA machine also our CUDA kernel against
// PyTorch's CUDA SDPA backends (gpu_bench.h); with --scan-scale the real-size scan benchmark
// instead (scan_scale_bench.h). Exit codes: 0 ran, 1 the scan-scale layer failed, 2 bad usage.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench_report.h"
#include "bench_timing.h"
#include "core/kernel_registry.h"
#include "core/torch_roof.h"
#include "gpu_bench.h"
#include "heatmap_bench.h"
#include "kernels/cpu/cpu_isa.h"
#include "scan_scale_bench.h"

namespace {

using attnscope::Precision;
using namespace attnscope::bench;

constexpr const char* kUsage =
    "usage: attnscope-bench [--json] [--grid default|full] [--reps N] [--warmup N] "
    "[--threads N] [--heads N] [--seqlen N] [--head-dim N] [--causal] [--no-heatmap]\n"
    "       [--no-gpu | --gpu-only] [--gpu-quick]\n"
    "       attnscope-bench --scan-scale [--seqlen N] [--heads N] [--reps N] [--threads N]\n"
    "  default grid: S=2048, D=64, B*H=8, causal off, fp32 and bf16 (--seqlen / --head-dim\n"
    "                change S / D there, --causal makes it causal)\n"
    "  full grid:    S in {512,1024,2048,4096} x D in {64,128} x causal off/on x fp32/bf16\n"
    "  both add a pooled 1024x1024 heatmap of one head at S=16384 (--no-heatmap skips it)\n"
    "  GPU part (CUDA device only): own CUDA kernel vs SDPA flash / efficient / cuDNN at\n"
    "                S in {2048,8192} x D in {64,128} x causal off/on, bf16 (--gpu-quick: S=256,\n"
    "                D=64); --gpu-only skips the CPU points and the heatmap\n"
    "  --scan-scale: a real-size layer (B=1, H=32, Hkv=8, S (default 4096), D=128, bf16,\n"
    "                causal) recorded with LibTorch: its fwd+bwd, `scan` of it and the window's\n"
    "                first heatmap, with peak memory and the targets met or missed; --heads H\n"
    "                makes it H heads and H/4 kv heads (the window then is not measured)\n";

struct Options {
  bool json = false;
  bool full_grid = false;
  bool causal = false;  // of the default grid
  bool heatmap = true;
  bool gpu = true, cpu = true, gpu_quick = false;
  bool scan_scale = false;
  bool reps_given = false;   // --reps (the scan-scale layer's steps default to 3)
  bool heads_given = false;  // --heads (the scan-scale layer has 32 by default)
  int heads = 8;
  int seqlen = 0, head_dim = 64;  // of the default grid (S 2048) or the scan-scale layer (4096)
  BenchSettings settings;
};

// Parses an integer option value in [lo, 2^20]; false on garbage.
bool integer(const char* text, int lo, int& out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < lo || v > 1 << 20) return false;
  out = static_cast<int>(v);
  return true;
}

bool parse(int argc, char** argv, Options& o, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--json") {
      o.json = true;
    } else if (a == "--causal") {
      o.causal = true;
    } else if (a == "--no-heatmap") {
      o.heatmap = false;
    } else if (a == "--no-gpu") {
      o.gpu = false;
    } else if (a == "--gpu-only") {
      o.cpu = o.heatmap = false;
    } else if (a == "--gpu-quick") {
      o.gpu_quick = true;
    } else if (a == "--scan-scale") {
      o.scan_scale = true;
    } else if (a == "--grid" && has_value) {
      const std::string g = argv[++i];
      if (g != "full" && g != "default") return error = "--grid takes default or full", false;
      o.full_grid = g == "full";
    } else if (a == "--warmup" && has_value) {
      if (!integer(argv[++i], 0, o.settings.warmup)) return error = a + " takes N >= 0", false;
    } else if ((a == "--reps" || a == "--threads" || a == "--heads" || a == "--seqlen" ||
                a == "--head-dim") &&
               has_value) {
      o.reps_given = o.reps_given || a == "--reps";
      o.heads_given = o.heads_given || a == "--heads";
      int& target = a == "--reps"      ? o.settings.reps
                    : a == "--threads" ? o.settings.threads
                    : a == "--heads"   ? o.heads
                    : a == "--seqlen"  ? o.seqlen
                                       : o.head_dim;
      if (!integer(argv[++i], 1, target)) return error = a + " takes a positive integer", false;
    } else if (a == "--help" || a == "-h") {
      return error = "", false;
    } else {
      return error = "unknown or incomplete argument '" + a + "'", false;
    }
  }
  if (o.seqlen == 0) o.seqlen = o.scan_scale ? 4096 : 2048;
  return true;
}

// The shapes to time, as fp32 points; run_shape adds the bf16 point of each.
std::vector<BenchPoint> grid(const Options& o) {
  std::vector<BenchPoint> points;
  const std::vector<int64_t> seqlens =
      o.full_grid ? std::vector<int64_t>{512, 1024, 2048, 4096} : std::vector<int64_t>{o.seqlen};
  const std::vector<int64_t> dims =
      o.full_grid ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{o.head_dim};
  const std::vector<bool> causal =
      o.full_grid ? std::vector<bool>{false, true} : std::vector<bool>{o.causal};
  for (int64_t s : seqlens) {
    for (int64_t d : dims) {
      for (bool c : causal) points.push_back({1, o.heads, s, d, c, Precision::f32});
    }
  }
  return points;
}

// The fp32 and bf16 points of one shape, timed in the same rounds, so that the bf16 / fp32
// ratio pairs samples taken seconds apart. Our runs come first in a round, next to each other.
std::vector<PointResult> run_shape(const BenchPoint& shape, const BenchSettings& settings) {
  std::fprintf(stderr, "attnscope-bench: B=%lld H=%lld S=%lld D=%lld %s, fp32 and bf16\n",
               static_cast<long long>(shape.batch), static_cast<long long>(shape.heads),
               static_cast<long long>(shape.seqlen), static_cast<long long>(shape.head_dim),
               shape.causal ? "causal" : "full");
  std::vector<PointResult> results;
  std::vector<BenchInputs> inputs;
  for (Precision p : {Precision::f32, Precision::bf16}) {
    BenchPoint point = shape;
    point.precision = p;
    results.push_back({point, {}});
    inputs.push_back(make_bench_inputs(point));
  }
  // Our two runs of both precisions first, next to each other, then LibTorch's.
  const std::pair<const char*, bool> runs[2][2] = {{{kOwn, false}, {kOwn, true}},
                                                   {{kTorchMath, false}, {kTorchFlash, false}}};
  std::vector<TimingPlan> plan;
  std::vector<size_t> point_of;  // the results index of each plan entry
  for (const auto& group : runs) {
    for (size_t i = 0; i < results.size(); ++i) {
      for (const auto& [name, instrument] : group) {
        plan.push_back({attnscope::find_variant(name), instrument, results[i].point, &inputs[i]});
        point_of.push_back(i);
      }
    }
  }
  std::vector<VariantTiming> timings = time_interleaved(plan, settings);
  for (size_t j = 0; j < timings.size(); ++j) {
    results[point_of[j]].timings.push_back(std::move(timings[j]));
  }
  return results;
}

// LibTorch's OpenMP workers (libgomp) spin for a while after each parallel region by default and
// so take the cores from the variant timed next (measured on 2 cores: our fwd+bwd ~15 % slower
// right after a LibTorch sample, 2x with OMP_WAIT_POLICY=ACTIVE; LibTorch's own times did not
// change with PASSIVE). libgomp reads the policy when it is loaded, before main, so the bench
// runs itself again with OMP_WAIT_POLICY=PASSIVE unless the caller set a policy.
void let_openmp_workers_sleep(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: the bench then runs as it is
}

}  // namespace

int main(int argc, char** argv) {
  let_openmp_workers_sleep(argv);
  Options options;
  std::string error;
  if (!parse(argc, argv, options, error)) {
    if (error.empty()) {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << "attnscope-bench: " << error << "\n" << kUsage;
    return 2;
  }
  if (options.scan_scale) {
    attnscope::LayerShape shape;
    shape.seqlen = options.seqlen;
    if (options.heads_given) {
      shape.heads = options.heads;
      shape.kv_heads = std::max(1, options.heads / 4);
    }
    return run_scan_scale(std::cout, shape, options.settings.threads,
                          options.reps_given ? options.settings.reps : 3);
  }
  BenchReport report;
  report.settings = options.settings;
  report.cpu_isa = attnscope::cpu::cpu_isa();
  report.cpu_isas_available = attnscope::cpu::cpu_isas_available();
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  report.omp_wait_policy = policy != nullptr ? policy : "unset (libgomp: spin, then sleep)";
  if (options.cpu) {
    std::fprintf(stderr, "attnscope-bench: CPU kernels on %s; LibTorch sgemm roof\n",
                 report.cpu_isa.c_str());
    report.roof = attnscope::torch_sgemm_roof(2048, options.settings.threads, 5);
  }
  for (const BenchPoint& shape : options.cpu ? grid(options) : std::vector<BenchPoint>{}) {
    for (PointResult& r : run_shape(shape, options.settings)) report.points.push_back(std::move(r));
  }
  if (options.gpu) {
    const GpuReport gpu = run_gpu_bench(options.settings, options.gpu_quick);
    std::ostringstream json, table;
    write_gpu_json(json, gpu);
    write_gpu_table(table, gpu);
    report.gpu_json = json.str();
    report.gpu_table = table.str();
  }
  if (options.heatmap) {
    std::fprintf(stderr, "attnscope-bench: pooled 1024x1024 heatmap at S=16384\n");
    report.heatmap = time_heatmap({}, options.settings);
    report.has_heatmap = true;
  }
  if (options.json) {
    write_json(std::cout, report);
  } else {
    write_table(std::cout, report);
  }
  return 0;
}
