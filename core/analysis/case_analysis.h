// The analysis facade the GUI and the CLI both call (plain C++, no LibTorch or Qt): runs a
// case through the instrumented CPU kernels at the chosen precision in the chosen modes,
// optionally clips the gradients, compares recorded outputs with the recomputation and turns
// everything into findings (DESIGN §3, §4) plus the summary stats of `scan --json`.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/clipping.h"
#include "core/analysis/finding.h"
#include "core/analysis/recorded_check.h"
#include "core/case_inputs.h"
#include "core/case_model.h"
#include "core/kernel_registry.h"  // mode_name, precision_name
#include "core/replay.h"
#include "core/result.h"
#include "core/run_choice.h"
#include "kernels/attn_types.h"  // CellCounts, Mode
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

// The run choice (core/run_choice.h) left empty replays the recorded run (core/replay.h); any
// what-if of it is said by CaseAnalysis::judged_under (resolve()), and the recorded-output check
// still compares the recorded tensors with the replay of the recorded run, never with the
// what-if. Its backend is not used: the findings replay attnscope's kernels.
struct AnalysisSettings {
  RunChoice run;
  bool recorded_check = true;   // compare recorded o / lse / dq / dk / dv when the case has them
  bool precision_check = true;  // fp64 recomputation for precision_loss
  // Infer what the dump does not record from the recorded o (core/analysis/run_inference.h).
  bool infer_run = true;
  // fp64 gradients for precision_loss only when B * H * Sq * Sk is at most this (their time;
  // recorded gradients are always checked); the fp64 forward has no limit.
  int64_t reference_gradient_budget = int64_t{1} << 22;
  double explosion_ratio = 1e3;  // gradient_explosion: head norm / median head norm
  int threads = 0;               // 0 = hardware concurrency
  // Polled between the phases (each mode run, each fp64 reference head or kv group, the
  // recorded comparison) and by the kernels of a mode run per tile; once it returns true
  // analyze_case stops and returns what it has (never a cut-short run) with
  // CaseAnalysis::interrupted set. Called from worker threads: it must be thread-safe.
  std::function<bool()> cancelled;
};

// One instrumented CPU run of the case.
struct ModeRun {
  Mode mode = Mode::fused;
  Precision precision = Precision::f32;
  // SDPA MATH's upcast: the fused kernel ran at fp32 on the inputs exact in `precision`, and
  // o, dq, dk, dv were rounded once to `precision` (lse stays fp32).
  bool upcast = false;
  CpuAttnResult out;  // o, lse, m, l, d, dq, dk, dv as fp32 (values exact in the precision)
  CpuTrace trace;     // tile stats, provenance, row and head gradient norms
};

// Gradient norms of a case: heads [B, H] for dQ and [B, Hk] for dK / dV; rows [B, H, Sq] for
// dQ and [B, Hk, Sk] for dK / dV.
struct GradientNorms {
  std::vector<double> dq_head, dk_head, dv_head;
  std::vector<float> dq_row, dk_row, dv_row;
  double total = 0;  // ||(dQ, dK, dV)||_2
};

// clip_grad_norm_ applied to one run's gradients.
struct ClipReport {
  Mode mode = Mode::fused;
  ClipScope scope = ClipScope::whole_case;
  double max_norm = 0;
  std::vector<ClipResult> clips;  // one per clip call (see clip_case_gradients)
  GradientNorms before, after;
  CaseGradients clipped;  // the gradients after clipping
};

// "fused", "unfused" or "upcast" (SDPA MATH) for a run.
const char* run_name(const ModeRun& r);

struct RunStats {
  Mode mode = Mode::fused;
  Precision precision = Precision::f32;
  bool upcast = false;
  double max_abs_s = 0;             // over finite visible scores
  double min_lse = 0, max_lse = 0;  // over finite LSE (0 / 0 when none)
  CellCounts o, lse, dq, dk, dv;    // elements by class (finite, NaN, +inf, -inf; none masked)
  GradientNorms norms;
};

struct CaseStats {
  std::vector<RunStats> runs;
  int64_t fully_masked_rows = 0;     // (b, h, i) with no visible key
  std::optional<double> max_abs_qk;  // max |q.k| before scaling where it was scanned
};

struct CaseAnalysis {
  std::string path;
  AttnParams params;  // the run's parameters; mask / bias / dropout pointers are cleared
  Replay replay;      // what the recorded run did (the dump's run semantics)
  // Some setting differs from the replay (resolve(): what_if()): the runs (and their findings)
  // are a what-if.
  bool what_if = false;
  // Under which semantics the runs were judged (ResolvedRun::judged_under): "as recorded
  // (sdpa_flash, torch 2.11.0, fp32: fully masked rows give 0)" or "what-if: precision fp16,
  // mask fill -1e9 (recorded: ...)".
  std::string judged_under;
  std::vector<ModeRun> runs;
  std::vector<ClipReport> clips;  // one per run when clip_norm is set
  // o, lse, dq, dk, dv present in the case, each against the replay of the recorded run; o and
  // the gradients are left out when the run's dropout cannot be replayed.
  std::vector<RecordedComparison> recorded;
  // Under a what-if that changes the runs, with recorded outputs: those the what-if reproduces
  // (within the accuracy rule against the what-if's own fp64 reference, on some value finite in
  // both: a recording and a replay that are NaN everywhere reproduce nothing), a hypothesis test
  // ("the recording matches scale 1"); nullopt when no what-if was tested.
  std::optional<std::vector<std::string>> what_if_explains;
  // Why precision_loss left the gradients out (reference_gradient_budget), else empty.
  std::string reference_note;
  std::vector<Finding> findings;  // sorted (errors first)
  CaseStats stats;
  // AnalysisSettings::cancelled stopped the analysis: findings and stats are incomplete.
  bool interrupted = false;

  const ModeRun* run(Mode mode) const;
};

// What the hypothesis test found, in words: "the what-if reproduces the recorded o, lse" or
// "the what-if reproduces none of the recorded outputs"; empty when none was tested.
std::string what_if_explains_text(const CaseAnalysis& a);

// Fails when the case cannot be turned into kernel inputs (bad scale, mask shape), or
// (too_large, naming the size and the budget) when analysis_bytes exceeds the memory budget.
Result<CaseAnalysis> analyze_case(const CaseData& data, const AnalysisSettings& settings);

}  // namespace attnscope
