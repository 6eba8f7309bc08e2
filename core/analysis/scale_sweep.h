// Softmax-scale sweep: the case recomputed over log-spaced scales at several precisions and
// modes, reporting non-finite counts and max |S| per point, the finite ("safe") scale range
// per precision and mode, and the scale where it turns non-finite, refined by bisection (the
// data of a "safe range" plot).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "core/case_inputs.h"
#include "core/case_model.h"
#include "core/kernel_registry.h"  // mode_name, precision_name
#include "core/result.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

struct SweepSettings {
  RunChoice run;  // its mask fill; scale, precision and mode are swept
  // Scales [scale_min, scale_max] in `points` log-spaced steps; 0 = the case's scale / 64
  // and * 64.
  double scale_min = 0, scale_max = 0;
  int points = 25;
  std::vector<Precision> precisions = {Precision::f32, Precision::f16, Precision::bf16};
  std::vector<Mode> modes = {Mode::fused, Mode::unfused};
  bool backward = true;   // count non-finite gradients too
  int refine_steps = 12;  // bisection steps on the first finite -> non-finite transition
  int threads = 0;
  // Polled before every run; once true the sweep returns what it has (ScaleSweep::interrupted).
  const std::atomic<bool>* stop = nullptr;
  // The same as a predicate (e.g. a GUI job's "a newer request exists"), polled likewise.
  std::function<bool()> cancelled;
};

struct SweepPoint {
  double scale = 0;
  Precision precision = Precision::f32;
  Mode mode = Mode::fused;
  int64_t nonfinite_o = 0, nonfinite_lse = 0, nonfinite_grad = 0;
  double max_abs_s = 0;  // over finite visible scores
  bool finite() const { return nonfinite_o + nonfinite_lse + nonfinite_grad == 0; }
};

// Finite range of one (precision, mode) series.
struct SafeRange {
  Precision precision = Precision::f32;
  Mode mode = Mode::fused;
  bool any_finite = false;
  double low = 0, high = 0;  // longest run of finite swept scales (inclusive)
  // The smallest scale found non-finite above a finite one (refined by bisection): the case
  // stays finite just below it. Absent when the series never turns non-finite going up.
  std::optional<double> threshold;
  bool case_scale_finite = false;  // the case's own scale is finite in this series
};

struct ScaleSweep {
  double case_scale = 0;
  std::vector<double> scales;
  std::vector<SweepPoint> points;  // scale-major: for each scale, every (precision, mode)
  std::vector<SafeRange> ranges;   // per (precision, mode)
  // `stop` or `cancelled` ended the sweep early: points holds the runs done so far, ranges is
  // empty.
  bool interrupted = false;
};

// Fails when the case cannot be turned into kernel inputs or the scale range is invalid.
Result<ScaleSweep> scale_sweep(const CaseData& data, const SweepSettings& settings);

}  // namespace attnscope
