// Plain C++ adapter (no Qt) from a loaded case plus the GUI's what-if settings to what the
// views of one (batch, head) show: S, P, dP, dS (full resolution or pooled to the view's pixel
// size), O, dQ, dK, dV of that head from the chosen backend (optionally clipped by the
// clip_grad_norm_ of the whole case or of its kv-head group, case_clip.h), their error against
// the fp64 reference, and the per-row series m, LSE, l, ||O_i||, ||dQ_i||. A HeadCache keeps the
// stage products so that a change reruns only the stages after it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/clipping.h"
#include "core/case_inputs.h"
#include "core/case_model.h"
#include "core/result.h"
#include "core/view/case_clip.h"
#include "core/view/head_keys.h"
#include "core/view/head_stages.h"
#include "core/view/head_view.h"
#include "core/view/matrix_grid.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

// One recompute request. out_rows / out_cols: the heatmap's size in pixels; a window larger
// than that is pooled. An empty (default) window means the whole Sq x Sk matrix.
struct HeadRequest {
  // What to run (core/run_choice.h) with exactly one mode (empty: fused). Its backend, a
  // registry variant (core/kernel_registry.h), computes O, LSE, dQ, dK, dV (empty: the own CPU
  // kernel in the mode; a variant with a fixed mode runs in that mode); its clip_grad_norm_
  // covers the scope's gradients (the whole case by default, as the findings and the CLI clip)
  // and the head shows its share of the clipped gradients.
  RunChoice run;
  int64_t batch = 0, head = 0;
  MatrixWindow window;
  int64_t out_rows = 512, out_cols = 512;
  int threads = 0;         // kernel worker threads; 0 = all cores
  bool reference = false;  // compute the error grids against the fp64 reference
  // Compute the forward stage alone (HeadResult::gradients false): what the S, P and O views
  // show, a fraction of the whole head's time, so that a slider drag redraws them sooner; the
  // same request without it then adds the backward from the cache. Honoured for a pooled window
  // of the own CPU kernel without clip or reference; otherwise the whole head runs.
  bool forward_only = false;
  // With forward_only: the forward's row statistics alone (m, l, LSE, and S pooled on the way;
  // no P V, so O is left out: HeadResult::outputs false), all the S view shows, in about half
  // the forward's time; the same request without it then computes the forward. Fused only.
  bool forward_stats_only = false;
  // Which of S, P, dP, dS to compute when the window is pooled: pooling each one adds several
  // ms to a long head's forward + backward, so the GUI asks for the visible one and computes
  // another when its tab is shown. Grids at full resolution always hold all four.
  ScoreSet scores = kAllScores;
  // Polled by the CPU kernels (CpuAttnOptions::cancelled, thread-safe); once true
  // compute_head throws KernelCancelled and the cache keeps only completed stages.
  std::function<bool()> cancelled;

  Mode mode() const { return run.modes.empty() ? Mode::fused : run.modes.front(); }
};

// Wall time of one stage of compute_head that ran (stages served from the cache are absent).
struct HeadPhase {
  // "inputs", "head slice", "cpu fwd+bwd" (or "cpu fwd+bwd+pool" when it pools the score grids on
  // the way; for forward_only "cpu fwd" / "cpu fwd+pool" ("cpu stats" / "cpu stats+pool" for
  // forward_stats_only), later "cpu bwd" / "cpu bwd+pool"),
  // "score grids", "backend", "reference", "grids"
  const char* name;
  double ms = 0;
};

// Everything the views of one head show, plus the settings it was computed with.
struct HeadResult {
  HeadRequest request;
  std::string file_path;  // the dump the case came from (set by the caller)
  std::string case_path;
  Precision precision = Precision::f32;    // the precision that ran
  double scale = 1.0;                      // the softmax scale that ran
  MaskFill mask_fill = MaskFill::neg_inf;  // the mask fill that ran (the recorded one by default)
  std::string backend = "cpu";             // what computed O, LSE, dQ, dK, dV
  // False for a forward_only result: dP, dS, dQ, dK, dV, ||dQ_i|| are empty (not computed yet).
  bool gradients = true;
  // False for a forward_stats_only result: O and ||O_i|| are empty too (not computed yet).
  bool outputs = true;
  bool has_dout = false;  // false: dO = 1 (gradient of sum(O))
  int64_t seqlen_q = 0, seqlen_k = 0, head_dim = 0, head_dim_v = 0;
  // Score-shaped, over request.window, shared with the stage cache; empty when not computed
  // (pooled and not in request.scores).
  SharedGrid s = empty_grid(), p = empty_grid(), dp = empty_grid(), ds = empty_grid();
  MatrixGrid o, dq;   // [Sq x Dv], [Sq x D] of the head, full resolution
  MatrixGrid dk, dv;  // [Sk x D], [Sk x Dv]: this query head's share of dK, dV
  // Backend (clipped when clip_norm is set) minus the fp64 reference, same layouts as o, dq,
  // dk, dv; empty unless request.reference.
  MatrixGrid o_err, dq_err, dk_err, dv_err;
  std::vector<float> m, lse, l, o_norm, dq_norm;  // [Sq] per query row
  std::optional<ClipResult> clip;  // the clip call covering the head, when clip_norm was set
  double elapsed_ms = 0;
  std::vector<HeadPhase> phases;  // in the order they ran

  // The grid a view shows (empty when not computed).
  const MatrixGrid& grid(HeadView view) const;
  // The first score grid computed (S, P, dP, dS order), else the empty s.
  const MatrixGrid* scoreGrid() const;
};

class HeadComputation;

// What compute_head computed last, per stage, with the key (head_keys.h) of the request part it
// depends on:
// the case's inputs converted to the run's precision (precision, mask fill; every head, so
// another head only slices) -> the head slice (+ batch, head) -> CPU forward statistics (m, l,
// LSE alone, forward_stats_only) or forward, then CPU backward (+ scale, mode) -> score grids (+
// window, pixels, budget; each matrix on its own) and backend outputs (+ backend); the fp64
// reference depends on the slice and the scale. When the kernel stages run and the grids are
// pooled, they pool the requested ones on the way (the fused forward S, the backward the others); a
// later window change or request of another matrix recomputes the grids alone. With a clip, the
// whole case's gradients (+ inputs, scale, mode, backend; not the head) and their clip calls (+
// max_norm, scope) are kept too, so another head of the case only picks its clip. Applying the clip
// and the error grids are cheap post-processes, always rerun. Valid for one CaseData: clear() it
// when the case changes.
class HeadCache {
 public:
  void clear() { *this = HeadCache{}; }

 private:
  friend class HeadComputation;
  // nullopt: no product, or one not whole (being overwritten in place).
  std::optional<InputsKey> inputs_key_;
  std::optional<HeadKey> head_key_;
  std::optional<KernelKey> stats_key_, forward_key_, kernel_key_;
  std::optional<BackendKey> backend_key_;
  std::optional<ScaledKey> reference_key_;
  std::optional<CaseGradsKey> case_grads_key_;
  std::optional<CaseClipsKey> case_clips_key_;
  std::array<std::optional<GridsKey>, 4> grid_keys_;  // of grids_: S, P, dP, dS
  std::shared_ptr<CaseInputs> inputs_;                // the slice's mask / bias point into it
  HeadSlice slice_;
  // lse, m, l from the statistics or forward stage, o from the forward; d, dq, dk, dv from the
  // backward.
  CpuAttnResult cpu_;
  ScoreGrids grids_ = {empty_grid(), empty_grid(), empty_grid(), empty_grid()};  // S, P, dP, dS
  HeadOutputs backend_;
  HeadReference reference_;
  CaseGradients case_grads_;            // of the whole case, for the clip (case_clip.h)
  std::vector<ClipResult> case_clips_;  // its clip calls at the request's max_norm and scope
};

// Recomputes one head of a loaded case, reusing `cache` (may be null) where the request allows.
// Fails (invalid_argument) on a bad (batch, head), settings make_case_inputs refuses or a
// backend that cannot run them. Runs the CPU kernels (and LibTorch for torch-* backends);
// never call it on the GUI thread.
Result<HeadResult> compute_head(const CaseData& data, const HeadRequest& request,
                                HeadCache* cache = nullptr);

}  // namespace attnscope
