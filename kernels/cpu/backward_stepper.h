// Step-by-step fused backward of one (batch, head) (DESIGN §6): backward_preprocess (D), then
// for each kv tile j (outer) and q tile i (inner) the stages score_tile -> mask_tile ->
// recompute_p -> accumulate_dv -> compute_dp -> compute_ds -> accumulate_dq -> accumulate_dk,
// dK_j / dV_j stored after each kv tile, and dQ stored at the end. Each step calls the kernel's
// own stage function with the kernel's operands, accumulation order and tile skipping, so the
// state after the last step is bit-identical to cpu_attention_backward for that head (dK, dV
// too when H == Hk; with GQA they hold only this head's share).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/attn_names.h"  // step_stage_name
#include "kernels/attn_trace.h"
#include "kernels/attn_types.h"  // StepStage
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

struct StepInfo {
  int64_t index = -1;  // step number, position() - 1 for the current step; -1 at the start
  StepStage stage = StepStage::start;
  int64_t q_tile = -1, kv_tile = -1;  // -1 where the step spans all tiles
  // The query rows x keys the step covers, resolved (no -1 ends); empty at the start.
  MatrixWindow window{0, 0, 0, 0};
  // Non-finite entries of the step's output: S (visible entries only: the fill of masked
  // scores is intentional), P, dP, dS, D, or the accumulator / stored block it updated.
  NonfiniteCount nonfinite;
  // Output entries that became non-finite in this step: all of a freshly computed tile's,
  // only the new ones of an accumulator.
  int64_t new_nonfinite = 0;
};

// The state after the last executed step. Shapes: Sq, Sk, D, Dv of the params.
struct StepperState {
  StepInfo step;
  // Intermediates of the current tile (step.q_tile, step.kv_tile), row-major [tile_rows x
  // tile_cols]; a matrix is empty until its stage ran on this tile. masked: MaskedEntry. p is
  // the undropped fp32 P (per AttnParams::backward_p), dp the dropped Z o (dO V^T) (as in
  // cpu_head_matrices); dv_acc sums round(P o keep)^T dO, without the 1 / (1 - p).
  int64_t tile_rows = 0, tile_cols = 0;
  std::vector<float> s, p, dp, ds;
  std::vector<uint8_t> masked;
  std::vector<float> d;       // [Sq] D; empty before backward_preprocess
  std::vector<float> dq_acc;  // [Sq, D] fp32 dQ so far: the kernel's chunk partials, summed
  std::vector<float> dk_acc;  // [tile_cols, D] fp32 dK_j of the current kv tile so far
  std::vector<float> dv_acc;  // [tile_cols, Dv] fp32 dV_j of the current kv tile so far
  std::vector<float> dk, dv;  // [Sk, D], [Sk, Dv] stored rows of completed kv tiles, 0 elsewhere
  std::vector<float> dq;      // [Sq, D] stored dQ after store_dq, 0 before
  int64_t kv_tiles_done = 0;
};

class BackwardStepper {
 public:
  // params (its mask / bias) and inputs must outlive the stepper; fwd holds the fused forward's
  // outputs for the same inputs. Throws std::invalid_argument for Mode::unfused (the eager
  // kernel has no tiles to step) or a bad (b, h).
  BackwardStepper(const AttnParams& params, const CpuAttnOptions& options,
                  const CpuAttnInputs& inputs, const CpuForwardView& fwd, int64_t b, int64_t h);
  ~BackwardStepper();
  BackwardStepper(BackwardStepper&&) noexcept;
  BackwardStepper& operator=(BackwardStepper&&) noexcept;

  int64_t size() const;      // number of steps
  int64_t position() const;  // steps executed, in [0, size()]
  bool step_forward();       // runs step position(); false at the end
  bool step_back();          // recomputes the state after position() - 1 steps; false at 0
  void seek(int64_t n);      // the state after n steps (clamped to [0, size()])
  // Steps forward until a step's new_nonfinite > 0 and stops after it; true when found,
  // otherwise runs to the end and returns false.
  bool run_to_next_nonfinite();

  const StepperState& current() const;
  StepInfo describe(int64_t n) const;  // stage, tiles and ranges of step n (no counts)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnscope
