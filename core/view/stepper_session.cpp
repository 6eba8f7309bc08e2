// Backward stepper of one head and its snapshots (see stepper_session.h).
#include "core/view/stepper_session.h"

#include <algorithm>
#include <stdexcept>

#include "core/view/head_grids.h"

namespace attnscope {
namespace {

// A grid over rows [r0, r0 + rows) x cols [c0, c0 + cols) of a total_rows x total_cols matrix;
// an empty buffer gives an empty grid with the name.
MatrixGrid block_grid(const char* name, const std::vector<float>& values,
                      const std::vector<uint8_t>& masked, int64_t r0, int64_t rows, int64_t c0,
                      int64_t cols, int64_t total_rows, int64_t total_cols) {
  if (values.empty() || static_cast<int64_t>(values.size()) != rows * cols) {
    MatrixGrid g;
    g.name = name;
    return g;
  }
  const bool use_mask = masked.size() == values.size();
  return full_grid(name, values, use_mask ? masked : std::vector<uint8_t>{}, r0, rows, c0, cols,
                   total_rows, total_cols);
}

}  // namespace

const MatrixGrid* StepperSnapshot::grid(const std::string& name) const {
  for (const std::vector<MatrixGrid>* list : {&tile, &accumulators}) {
    for (const MatrixGrid& g : *list) {
      if (g.name == name) return &g;
    }
  }
  return nullptr;
}

Result<std::unique_ptr<StepperSession>> StepperSession::create(const CaseData& data,
                                                               const RunChoice& settings, int64_t b,
                                                               int64_t h, int threads) {
  const CaseDims& d = data.info.dims;
  if (b < 0 || b >= d.batch || h < 0 || h >= d.heads) {
    return make_error(
        ErrorCode::invalid_argument,
        data.info.path + ": no (batch " + std::to_string(b) + ", head " + std::to_string(h) + ")",
        "pick a batch in [0, B) and a head in [0, H)");
  }
  Result<CaseInputs> inputs = make_case_inputs(data, settings, InputValues::none);
  if (!inputs) return inputs.error();
  std::unique_ptr<StepperSession> s(new StepperSession);
  s->case_path_ = data.info.path;
  s->batch_ = b;
  s->head_ = h;
  s->inputs_ = std::move(inputs).value();
  s->slice_ = slice_head(data, s->inputs_, b, h);
  CpuAttnOptions options;  // the stepper walks the fused kernel
  options.threads = threads;
  s->forward_ = cpu_attention(s->slice_.params, options, s->slice_.inputs());
  const CpuForwardView fwd{s->forward_.o.data(), s->forward_.m.data(), s->forward_.l.data()};
  s->stepper_ =
      std::make_unique<BackwardStepper>(s->slice_.params, options, s->slice_.inputs(), fwd, 0, 0);
  return s;
}

StepperSession::~StepperSession() = default;

StepperSnapshot StepperSession::seek(int64_t n) {
  stepper_->seek(std::clamp<int64_t>(n, 0, stepper_->size()));
  return snapshot(false);
}

StepperSnapshot StepperSession::run_to_nonfinite(int64_t from) {
  stepper_->seek(std::clamp<int64_t>(from, 0, stepper_->size()));
  const bool found = stepper_->run_to_next_nonfinite();
  return snapshot(found);
}

StepperSnapshot StepperSession::snapshot(bool found) const {
  const StepperState& st = stepper_->current();
  const AttnParams& p = slice_.params;
  StepperSnapshot out;
  out.case_path = case_path_;
  out.batch = batch_;
  out.head = head_;
  out.precision = p.precision;
  out.position = stepper_->position();
  out.size = stepper_->size();
  out.found = found;
  out.step = st.step;
  out.tile_rows = st.tile_rows;
  out.tile_cols = st.tile_cols;
  out.kv_tiles_done = st.kv_tiles_done;
  const StepInfo first = stepper_->describe(std::min<int64_t>(1, out.size - 1));
  out.tile_rows = first.window.row_end - first.window.row_begin;
  out.tile_cols = first.window.col_end - first.window.col_begin;
  out.q_tiles = out.tile_rows > 0 ? (p.seqlen_q + out.tile_rows - 1) / out.tile_rows : 0;
  out.kv_tiles = out.tile_cols > 0 ? (p.seqlen_k + out.tile_cols - 1) / out.tile_cols : 0;

  const StepInfo& s = st.step;
  const int64_t r0 = s.window.row_begin, c0 = s.window.col_begin;
  const int64_t rows = st.tile_rows, cols = st.tile_cols;
  const int64_t sq = p.seqlen_q, sk = p.seqlen_k;
  const bool on_tile = s.q_tile >= 0 && s.kv_tile >= 0;
  const std::vector<float> none;
  const std::vector<uint8_t> no_mask;
  const char* tile_names[] = {"tile S", "tile P", "tile dP", "tile dS"};
  const std::vector<float>* tile_values[] = {&st.s, &st.p, &st.dp, &st.ds};
  for (int k = 0; k < 4; ++k) {
    out.tile.push_back(block_grid(tile_names[k], on_tile ? *tile_values[k] : none, st.masked, r0,
                                  rows, c0, cols, sq, sk));
  }
  const int64_t kv0 = s.kv_tile >= 0 ? s.window.col_begin : 0;
  const int64_t kv_rows = s.kv_tile >= 0 ? st.tile_cols : 0;
  out.accumulators.push_back(block_grid("D", st.d, no_mask, 0, sq, 0, 1, sq, 1));
  out.accumulators.push_back(
      block_grid("dQ acc", st.dq_acc, no_mask, 0, sq, 0, p.head_dim, sq, p.head_dim));
  out.accumulators.push_back(
      block_grid("dK_j acc", st.dk_acc, no_mask, kv0, kv_rows, 0, p.head_dim, sk, p.head_dim));
  out.accumulators.push_back(
      block_grid("dV_j acc", st.dv_acc, no_mask, kv0, kv_rows, 0, p.head_dim_v, sk, p.head_dim_v));
  out.accumulators.push_back(
      block_grid("dK", st.dk, no_mask, 0, sk, 0, p.head_dim, sk, p.head_dim));
  out.accumulators.push_back(
      block_grid("dV", st.dv, no_mask, 0, sk, 0, p.head_dim_v, sk, p.head_dim_v));
  out.accumulators.push_back(
      block_grid("dQ", st.dq, no_mask, 0, sq, 0, p.head_dim, sq, p.head_dim));
  return out;
}

}  // namespace attnscope
