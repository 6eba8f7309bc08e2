// Pooled heatmap timing against one forward pass, with the peak extra memory of each call.
#include "heatmap_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "alloc_counter.h"
#include "kernels/cpu/fused_attention.h"
#include "kernels/cpu/head_matrices.h"

namespace attnscope::bench {
namespace {

template <typename Fn>
double median_ms(int reps, Fn&& fn) {
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::vector<float> random_floats(int64_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& e : x) e = unit(gen);
  return x;
}

}  // namespace

HeatmapResult time_heatmap(const HeatmapPoint& point, const BenchSettings& settings) {
  HeatmapResult r;
  r.point = point;
  AttnParams params;
  params.seqlen_q = params.seqlen_k = point.seqlen;
  params.head_dim = params.head_dim_v = point.head_dim;
  params.scale = 1.0 / std::sqrt(static_cast<double>(point.head_dim));
  params.precision = Precision::f32;
  CpuAttnOptions options;
  options.threads = settings.threads;

  std::mt19937 gen(16384u);
  const int64_t n = point.seqlen * point.head_dim;
  const std::vector<float> q = random_floats(n, gen), k = random_floats(n, gen),
                           v = random_floats(n, gen), dout = random_floats(n, gen);
  const CpuAttnInputs inputs{q.data(), k.data(), v.data(), dout.data()};
  std::vector<float> o(n), lse(point.seqlen), m(point.seqlen), l(point.seqlen);
  const auto forward = [&] {
    cpu_attention_forward(params, options, inputs, {o.data(), lse.data(), m.data(), l.data()});
  };
  forward();
  r.forward_ms = median_ms(settings.reps, forward);

  const struct {
    const char* name;
    MatrixSelection which;
  } selections[] = {{"s", {true, false, false, false}},
                    {"p", {false, true, false, false}},
                    {"s,p,dp,ds", {true, true, true, true}}};
  for (const auto& sel : selections) {
    HeatmapTiming t;
    t.matrices = sel.name;
    const auto pooled = [&] {
      cpu_pooled_matrices(params, options, inputs, 0, 0, point.pixels, point.pixels, {}, sel.which);
    };
    const int64_t before = allocated_bytes();
    reset_peak_bytes();
    pooled();
    t.peak_extra_bytes = peak_bytes() - before;
    t.ms = median_ms(settings.reps, pooled);
    t.forward_passes = t.ms / r.forward_ms;
    r.timings.push_back(t);
  }
  return r;
}

}  // namespace attnscope::bench
