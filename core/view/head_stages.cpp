// Stages of the head recomputation (see head_stages.h).
#include "core/view/head_stages.h"

#include <algorithm>

#include "core/kernel_registry.h"
#include "core/memory_budget.h"
#include "core/view/head_grids.h"
#include "kernels/reference/reference_attention.h"

namespace attnscope {
namespace {

inline constexpr const char* kScoreNames[] = {"S", "P", "dP", "dS"};

std::vector<float> to_f32(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

}  // namespace

GridPlan plan_score_grids(const MatrixWindow& window, int64_t seqlen_q, int64_t seqlen_k,
                          int64_t out_rows, int64_t out_cols) {
  GridPlan plan;
  MatrixWindow& w = plan.window;
  w.row_begin = std::clamp<int64_t>(window.row_begin, 0, seqlen_q - 1);
  w.row_end = window.row_end < 0 ? seqlen_q
                                 : std::clamp<int64_t>(window.row_end, w.row_begin + 1, seqlen_q);
  w.col_begin = std::clamp<int64_t>(window.col_begin, 0, seqlen_k - 1);
  w.col_end = window.col_end < 0 ? seqlen_k
                                 : std::clamp<int64_t>(window.col_end, w.col_begin + 1, seqlen_k);
  const int64_t rows = w.row_end - w.row_begin, cols = w.col_end - w.col_begin;
  plan.rows = std::min(rows, std::max<int64_t>(1, out_rows));
  plan.cols = std::min(cols, std::max<int64_t>(1, out_cols));
  plan.full = plan.rows == rows && plan.cols == cols &&
              head_matrix_resolution(rows, cols) == MatrixResolution::full;
  if (plan.full) return plan;
  // Pooled cells cost about what full-resolution entries do: keep them within the budget too,
  // and below the window's size when the window itself is over the budget.
  const bool over_budget = plan.rows == rows && plan.cols == cols;
  if (over_budget || head_matrix_resolution(plan.rows, plan.cols) == MatrixResolution::pooled) {
    do {
      plan.rows = (plan.rows + 1) / 2;
      plan.cols = (plan.cols + 1) / 2;
    } while ((plan.rows > 1 || plan.cols > 1) &&
             head_matrix_resolution(plan.rows, plan.cols) == MatrixResolution::pooled);
  }
  return plan;
}

const SharedGrid& empty_grid() {
  static const SharedGrid empty = std::make_shared<const MatrixGrid>();
  return empty;
}

void score_grids(const HeadSlice& slice, const CpuAttnOptions& options, const GridPlan& plan,
                 const ForwardRows* rows, const ScoreSet& which, ScoreGrids& out) {
  const int64_t sq = slice.params.seqlen_q, sk = slice.params.seqlen_k;
  const MatrixWindow& w = plan.window;
  if (plan.full) {
    HeadMatrices hm = cpu_head_matrices(slice.params, options, slice.inputs(), 0, 0, w,
                                        score_grid_selection(which), rows);
    std::vector<float>* mats[] = {&hm.s, &hm.p, &hm.dp, &hm.ds};
    for (int k = 0; k < 4; ++k) {
      if (!which[k]) continue;
      out[k] = std::make_shared<const MatrixGrid>(full_grid(kScoreNames[k], std::move(*mats[k]),
                                                            hm.masked, w.row_begin, hm.rows,
                                                            w.col_begin, hm.cols, sq, sk));
    }
    return;
  }
  pooled_score_grids(cpu_pooled_matrices(slice.params, options, slice.inputs(), 0, 0, plan.rows,
                                         plan.cols, w, score_grid_selection(which), rows),
                     sq, sk, which, out);
}

MatrixSelection score_grid_selection(const ScoreSet& which) {
  MatrixSelection selection{which[0], which[1], which[2], which[3]};
  selection.cell_counts = false;
  return selection;
}

void pooled_score_grids(PooledHeadMatrices pm, int64_t seqlen_q, int64_t seqlen_k,
                        const ScoreSet& which, ScoreGrids& out) {
  PooledMatrix* mats[] = {&pm.s, &pm.p, &pm.dp, &pm.ds};
  for (int k = 0; k < 4; ++k) {
    if (which[k]) {
      out[k] = std::make_shared<const MatrixGrid>(
          pooled_grid(kScoreNames[k], pm, std::move(*mats[k]), seqlen_q, seqlen_k));
    }
  }
}

Result<HeadOutputs> run_backend(const HeadSlice& slice, const std::string& name, Mode mode,
                                int threads) {
  Result<VariantOutputs> run =
      run_backend_variant(name, slice.params, mode, threads, slice.variant_inputs());
  if (!run) return run.error();
  HeadOutputs out;
  out.backend = name;
  out.o = to_f32(run->o);
  out.lse = to_f32(run->lse);
  out.dq = to_f32(run->dq);
  out.dk = to_f32(run->dk);
  out.dv = to_f32(run->dv);
  return out;
}

HeadReference reference_outputs(const HeadSlice& slice) {
  ReferenceTrace ref =
      reference_attention(slice.params, slice.q64.data(), slice.k64.data(), slice.v64.data(),
                          slice.dout64.empty() ? nullptr : slice.dout64.data());
  return {std::move(ref.o), std::move(ref.dq), std::move(ref.dk), std::move(ref.dv)};
}

MatrixGrid error_grid(const char* name, const std::vector<float>& x, const std::vector<double>& ref,
                      int64_t rows, int64_t cols) {
  std::vector<float> err(x.size());
  for (size_t e = 0; e < x.size(); ++e) err[e] = static_cast<float>(x[e] - ref[e]);
  return dense_grid(name, std::move(err), rows, cols);
}

}  // namespace attnscope
