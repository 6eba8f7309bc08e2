// The stages compute_head (head_compute.h) chains for one (batch, head), each a plain function
// of the head slice (no Qt): the score-shaped grids S, P, dP, dS (full resolution or pooled,
// within the memory budget), O / LSE / gradients of a registry backend, and the error grids of
// O, dQ, dK, dV against the fp64 reference.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/view/head_slice.h"
#include "core/view/matrix_grid.h"
#include "kernels/cpu/head_matrices.h"

namespace attnscope {

// A subset of the score matrices S, P, dP, dS, in that order.
using ScoreSet = std::array<bool, 4>;
inline constexpr ScoreSet kAllScores = {true, true, true, true};

// The S, P, dP, dS grids, each never null (an empty grid when not computed) and never changed
// once made: the stage cache and every result that shows one share it.
using SharedGrid = std::shared_ptr<const MatrixGrid>;
using ScoreGrids = std::array<SharedGrid, 4>;
// The one empty grid every unset SharedGrid starts as.
const SharedGrid& empty_grid();

// How the score matrices of a window are computed: `full` at full resolution, else pooled to
// rows x cols cells.
struct GridPlan {
  MatrixWindow window;  // resolved: no -1 ends
  bool full = true;
  int64_t rows = 0, cols = 0;
};

// Full resolution when the window fits the view's out_rows x out_cols pixels and
// head_matrix_resolution (core/memory_budget.h) allows it; else pooled to at most the pixel
// size, halved until the pooled cells fit the budget as well.
GridPlan plan_score_grids(const MatrixWindow& window, int64_t seqlen_q, int64_t seqlen_k,
                          int64_t out_rows, int64_t out_cols);

// The `which` of the S, P, dP, dS grids (new grids in out[0..3]) of the slice's head as the CPU
// kernel in `options.mode` computes them; the others are left as they are. rows: the forward
// rows of a cpu_attention run on the slice (fused mode reuses them instead of recomputing the
// forward), or null.
void score_grids(const HeadSlice& slice, const CpuAttnOptions& options, const GridPlan& plan,
                 const ForwardRows* rows, const ScoreSet& which, ScoreGrids& out);

// The selection of the `which` score matrices; pooled, each cell keeps max / min / class
// (full-resolution matrices ignore cell_counts).
MatrixSelection score_grid_selection(const ScoreSet& which);

// The `which` of the S, P, dP, dS grids (new grids in out[0..3]) of pooled matrices of a
// seqlen_q x seqlen_k head, e.g. those a cpu_attention run gathered on the way
// (PooledCapture), consumed.
void pooled_score_grids(PooledHeadMatrices pm, int64_t seqlen_q, int64_t seqlen_k,
                        const ScoreSet& which, ScoreGrids& out);

// O, LSE, dQ, dK, dV of one head (shapes as CpuAttnResult for B = H = Hk = 1).
struct HeadOutputs {
  std::string backend = "cpu";  // what computed them
  std::vector<float> o, lse, dq, dk, dv;
};

// Runs registry variant `name` on the slice; fails on an unknown name or a variant that
// cannot run the slice's settings. `mode` and `threads` as HeadRequest's.
Result<HeadOutputs> run_backend(const HeadSlice& slice, const std::string& name, Mode mode,
                                int threads);

// The fp64 reference outputs of the slice that the error grids need.
struct HeadReference {
  std::vector<double> o, dq, dk, dv;  // [Sq x Dv], [Sq x D], [Sk x D], [Sk x Dv]
};

HeadReference reference_outputs(const HeadSlice& slice);

// `name` grid of x - ref over a whole rows x cols matrix (fp32 difference of the fp64 values).
MatrixGrid error_grid(const char* name, const std::vector<float>& x, const std::vector<double>& ref,
                      int64_t rows, int64_t cols);

}  // namespace attnscope
