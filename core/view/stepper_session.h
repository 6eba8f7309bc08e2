// The backward stepper of one (batch, head) for the GUI (plain C++, no Qt): owns the head's
// inputs, its fused forward and a BackwardStepper (DESIGN §6), and turns the stepper's state
// into grids the stepper panel draws (the current tile's intermediates and the accumulators).
// Not thread-safe: the GUI drives one session from one worker thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/case_model.h"
#include "core/result.h"
#include "core/view/head_slice.h"
#include "core/view/matrix_grid.h"
#include "kernels/cpu/backward_stepper.h"

namespace attnscope {

// What the GUI shows after a stepper operation.
struct StepperSnapshot {
  std::string case_path;
  int64_t batch = 0, head = 0;
  Precision precision = Precision::f32;
  int64_t position = 0, size = 0;  // steps executed, of size
  bool found = false;              // run-to-next-non-finite stopped on a non-finite step
  // Run to non-finite over every (batch, head): how many heads after the one it started in it
  // stepped through to their end without a non-finite step, and whether it ended without one.
  int64_t heads_searched = 0;
  bool searched_to_end = false;
  StepInfo step;  // the step that ran last (stage start at position 0)
  int64_t q_tiles = 0, kv_tiles = 0, tile_rows = 0, tile_cols = 0;
  int64_t kv_tiles_done = 0;
  // The current tile's intermediates [tile rows x tile cols] (absolute row / key indices);
  // empty until their stage ran on the tile.
  std::vector<MatrixGrid> tile;  // "tile S", "tile P", "tile dP", "tile dS"
  // Accumulators: "D" [Sq x 1], "dQ acc" [Sq x D], "dK_j acc" / "dV_j acc" [tile cols x D]
  // (rows are absolute key indices), "dK" / "dV" [Sk x D] stored blocks, "dQ" after store_dq.
  std::vector<MatrixGrid> accumulators;

  const MatrixGrid* grid(const std::string& name) const;
};

class StepperSession {
 public:
  // Cuts (b, h) out of the case with the settings and runs the fused forward. Fails on bad
  // settings or indices.
  static Result<std::unique_ptr<StepperSession>> create(const CaseData& data,
                                                        const RunChoice& settings, int64_t b,
                                                        int64_t h, int threads);
  ~StepperSession();

  // Moves to the state after n steps (clamped) and describes it.
  StepperSnapshot seek(int64_t n);
  // From the state after n steps, runs to the next step that makes a value non-finite (or to
  // the end) and describes where it stopped.
  StepperSnapshot run_to_nonfinite(int64_t from);
  int64_t size() const { return stepper_->size(); }

 private:
  StepperSession() = default;
  StepperSnapshot snapshot(bool found) const;

  std::string case_path_;
  int64_t batch_ = 0, head_ = 0;
  CaseInputs inputs_;  // owns the mask / bias the slice's params point into
  HeadSlice slice_;
  CpuAttnResult forward_;
  std::unique_ptr<BackwardStepper> stepper_;
};

}  // namespace attnscope
