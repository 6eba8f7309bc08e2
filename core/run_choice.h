// What to run (DESIGN §3, "One run choice"): one type for every front end's what-if settings
// (the window's controls, the command lines, the head compute, the analysis, the sweep), and
// one resolve() that turns it, against a case's recorded run, into the parameters that run, the
// settings that are what-ifs and the text saying under which semantics findings were judged.
// Every field left empty replays the recorded run (core/replay.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/analysis/clipping.h"  // ClipScope
#include "core/replay.h"
#include "kernels/attn_types.h"

namespace attnscope {

struct RunChoice {
  std::optional<double> scale;         // softmax scale; absent: the case's, else 1/sqrt(D)
  std::optional<Precision> precision;  // absent: the recorded run's (autocast, dtype), else f32
  // Kernel semantics to emulate; empty: the recorded backend's (fused and unfused when the
  // dump does not name it). The window and the head compute choose one.
  std::vector<Mode> modes;
  bool upcast = false;                // with modes: fused runs emulate SDPA MATH's upcast
  std::optional<MaskFill> mask_fill;  // absent: the recorded framework's semantics
  // Registry variant computing O and the gradients of the heatmaps (core/kernel_registry.h);
  // empty: attnscope's own CPU kernel. The findings always replay attnscope's kernels.
  std::string backend;
  std::optional<double> clip_norm;  // clip_grad_norm_(max_norm) over clip_scope's gradients
  ClipScope clip_scope = ClipScope::whole_case;

  bool operator==(const RunChoice& o) const;
  bool operator!=(const RunChoice& o) const { return !(*this == o); }
  // The one mode chosen, when exactly one is.
  std::optional<Mode> mode() const;
};

// A setting of a choice that differs from the recorded run.
struct WhatIf {
  enum class Setting { scale, precision, mode, mask_fill, backend, clip };
  Setting setting = Setting::scale;
  std::string short_text;  // "precision bf16"
  std::string text;        // "precision bf16 (recorded fp16)"
  // The kernels' runs differ from the replay (scale, precision, mode, mask fill); a backend
  // changes only the heatmaps, a clip only what follows the gradients.
  bool changes_runs = false;
};

// A choice resolved against one case's recorded run.
struct ResolvedRun {
  double scale = 1;
  Precision precision = Precision::f32;
  std::vector<Mode> modes;  // the runs of the analysis, at least one
  bool upcast = false;
  MaskFill mask_fill = MaskFill::neg_inf;
  std::string backend;
  std::optional<double> clip_norm;
  ClipScope clip_scope = ClipScope::whole_case;
  std::vector<WhatIf> what_ifs;  // in the order of RunChoice's fields
  // "as recorded (sdpa_flash, torch 2.11.0, fp16: fully masked rows give 0)" or "what-if:
  // precision bf16, clip 1 (recorded: ...)": the same words in the window and `scan`.
  std::string judged_under;

  bool what_if() const { return !what_ifs.empty(); }
  // Some what-if changes the kernels' runs (WhatIf::changes_runs).
  bool runs_differ() const;
};

// A text that identifies a choice (equal choices, equal keys): for caches and job keys.
std::string choice_key(const RunChoice& choice);

// `recorded_scale`: the case's scale attribute, else 1/sqrt(D) (CaseConfig::effective_scale).
ResolvedRun resolve(const RunChoice& choice, const Replay& replay, double recorded_scale);

// The choice with every what-if of resolve() removed: what "Reset to recorded" leaves (a
// setting equal to the recorded run's is kept, it changes nothing).
RunChoice without_what_ifs(const RunChoice& choice, const Replay& replay, double recorded_scale);

}  // namespace attnscope
