// Step-by-step fused backward of one head (see backward_stepper.h). The plan of steps is
// fixed at construction (with the kernel's tile skipping); stepping back replays from the
// snapshot taken when the current kv tile began, or from the start.
#include "kernels/cpu/backward_stepper.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/cpu/backward_stages.h"
#include "kernels/cpu/head_tiles.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_scan.h"

namespace attnscope {
namespace {

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

struct Step {
  StepStage stage;
  int64_t qt, jt;  // -1 where the step spans all tiles
};

constexpr StepStage kTileStages[] = {StepStage::score_tile,    StepStage::mask_tile,
                                     StepStage::recompute_p,   StepStage::accumulate_dv,
                                     StepStage::compute_dp,    StepStage::compute_ds,
                                     StepStage::accumulate_dq, StepStage::accumulate_dk};

// Copies block [rows x cols] with row stride ld into a compact vector.
void copy_compact(const float* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& to) {
  to.resize(count(rows * cols));
  for (int64_t r = 0; r < rows; ++r) std::copy_n(x + r * ld, cols, to.data() + r * cols);
}

}  // namespace

struct BackwardStepper::Impl {
  // Everything a step changes.
  struct Mutable {
    int64_t position = 0;
    int64_t kv_tile = -1;  // kv tile whose accumulators are live
    StepperState st;
    cpu::BackwardTileBuffers tile;  // the kernel's tile buffers (row stride Bc)
  };
  struct Snapshot {
    bool valid = false;
    Mutable mu;
    int64_t chunk = 0;
    std::vector<float> partial;
  };

  Impl(const AttnParams& params, const CpuAttnInputs& inputs, const CpuForwardView& fwd, int64_t b,
       int64_t h)
      : prm(params), op(cpu::head_operands(prm, Mode::fused, inputs, b, h)) {
    const int64_t bh = b * prm.heads + h, Sq = prm.seqlen_q, D = prm.head_dim;
    m = fwd.m + bh * Sq;
    l = fwd.l + bh * Sq;
    o = fwd.o + bh * Sq * prm.head_dim_v;
    chunks = cpu::kv_chunks(prm.batch * prm.kv_heads, op.n_kv, prm.batch * prm.heads * Sq * D);
    plan_steps();
    reset();
  }

  // D of rows [i0, i0 + rows) into d (the kernel's backward_preprocess).
  void preprocess_rows(int64_t i0, int64_t rows, float* d) const {
    const int64_t Dv = prm.head_dim_v;
    cpu::backward_preprocess(op.x, rows, o + i0 * Dv, op.dout.data() + i0 * Dv, d);
  }

  cpu::ScoreTile tile_of(int64_t qt, int64_t jt) const {
    const int64_t i0 = qt * cpu::kTileRows, j0 = jt * cpu::kTileCols;
    return {i0, j0, std::min(cpu::kTileRows, prm.seqlen_q - i0),
            std::min(cpu::kTileCols, prm.seqlen_k - j0), cpu::kTileCols};
  }

  void plan_steps() {
    const int64_t Sq = prm.seqlen_q, D = prm.head_dim, Dv = prm.head_dim_v;
    std::vector<float> d(count(Sq));
    std::vector<uint8_t> q_clean(count(op.n_q));
    for (int64_t qt = 0; qt < op.n_q; ++qt) {
      const cpu::ScoreTile t = tile_of(qt, 0);
      preprocess_rows(t.i0, t.rows, d.data() + t.i0);
      const bool inputs_finite = cpu::all_finite(op.q.data() + t.i0 * D, t.rows * D) &&
                                 cpu::all_finite(op.dout.data() + t.i0 * Dv, t.rows * Dv);
      q_clean[count(qt)] =
          cpu::q_tile_clean(op.x, t.rows, inputs_finite, d.data() + t.i0, m + t.i0, l + t.i0);
    }
    plan.push_back({StepStage::backward_preprocess, -1, -1});
    for (int64_t jt = 0; jt < op.n_kv; ++jt) {
      for (int64_t qt = 0; qt < op.n_q; ++qt) {
        if (cpu::backward_skips(op.x, tile_of(qt, jt), op.kv_finite[count(jt)],
                                q_clean[count(qt)])) {
          continue;
        }
        for (StepStage stage : kTileStages) plan.push_back({stage, qt, jt});
      }
      plan.push_back({StepStage::store_dk_dv, -1, jt});
    }
    plan.push_back({StepStage::store_dq, -1, -1});
  }

  void reset() {
    const int64_t Sq = prm.seqlen_q, Sk = prm.seqlen_k, D = prm.head_dim, Dv = prm.head_dim_v;
    mu = Mutable{};
    mu.st.dq_acc.assign(count(Sq * D), 0.0f);
    mu.st.dk.assign(count(Sk * D), 0.0f);
    mu.st.dv.assign(count(Sk * Dv), 0.0f);
    mu.st.dq.assign(count(Sq * D), 0.0f);
    partials.assign(count(chunks), std::vector<float>(count(Sq * D), 0.0f));
    snap.valid = false;
  }

  // Accumulators of kv tile jt start at 0; the state here is the replay point of its steps.
  void begin_kv_tile(int64_t jt) {
    snap.valid = true;
    snap.mu = mu;
    snap.chunk = jt % chunks;
    snap.partial = partials[count(snap.chunk)];
    const int64_t cols = tile_of(0, jt).cols;
    mu.kv_tile = jt;
    mu.st.tile_cols = cols;
    mu.st.dk_acc.assign(count(cols * prm.head_dim), 0.0f);
    mu.st.dv_acc.assign(count(cols * prm.head_dim_v), 0.0f);
  }

  void seek(int64_t n) {
    n = std::clamp<int64_t>(n, 0, static_cast<int64_t>(plan.size()));
    if (n < mu.position) {
      if (snap.valid && snap.mu.position <= n) {
        mu = snap.mu;
        partials[count(snap.chunk)] = snap.partial;
      } else {
        reset();
      }
    }
    while (mu.position < n) run_step();
  }

  StepInfo describe(int64_t n) const {
    StepInfo info;
    if (n < 0 || n >= static_cast<int64_t>(plan.size())) return info;
    const Step& s = plan[count(n)];
    info.index = n;
    info.stage = s.stage;
    info.q_tile = s.qt;
    info.kv_tile = s.jt;
    MatrixWindow& w = info.window;
    w = {0, prm.seqlen_q, 0, prm.seqlen_k};
    if (s.qt >= 0 || s.jt >= 0) {
      const cpu::ScoreTile t = tile_of(std::max<int64_t>(s.qt, 0), std::max<int64_t>(s.jt, 0));
      if (s.qt >= 0) w.row_begin = t.i0, w.row_end = t.i0 + t.rows;
      if (s.jt >= 0) w.col_begin = t.j0, w.col_end = t.j0 + t.cols;
    }
    return info;
  }

  void run_step();
  void run_tile_stage(StepStage stage, const cpu::ScoreTile& t, StepInfo& info);

  AttnParams prm;
  cpu::HeadOperands op;      // op.x points at prm
  const float* m = nullptr;  // [Sq] forward rows of the head
  const float* l = nullptr;
  const float* o = nullptr;  // [Sq, Dv]
  int64_t chunks = 1;
  std::vector<Step> plan;
  Mutable mu;
  std::vector<std::vector<float>> partials;  // [chunks][Sq, D] the kernel's dQ partials
  Snapshot snap;
};

void BackwardStepper::Impl::run_step() {
  const Step& s = plan[count(mu.position)];
  if (s.jt >= 0 && s.jt != mu.kv_tile) begin_kv_tile(s.jt);
  StepperState& st = mu.st;
  StepInfo info = describe(mu.position);
  const cpu::HeadContext& x = op.x;
  const int64_t D = prm.head_dim, Dv = prm.head_dim_v;
  switch (s.stage) {
    case StepStage::backward_preprocess:
      st.d.resize(count(prm.seqlen_q));
      preprocess_rows(0, prm.seqlen_q, st.d.data());
      info.nonfinite = cpu::count_block(st.d.data(), 1, prm.seqlen_q, prm.seqlen_q);
      info.new_nonfinite = info.nonfinite.total();
      break;
    case StepStage::store_dk_dv: {
      const cpu::ScoreTile t = tile_of(0, s.jt);
      const int64_t before = cpu::count_nonfinite(st.dk_acc.data(), t.cols * D) +
                             cpu::count_nonfinite(st.dv_acc.data(), t.cols * Dv);
      float* dk = st.dk.data() + t.j0 * D;
      float* dv = st.dv.data() + t.j0 * Dv;
      cpu::backward_postprocess(x, st.dk_acc.data(), t.cols * D, dk);
      cpu::backward_postprocess_dv(x, st.dv_acc.data(), t.cols * Dv, dv);
      info.nonfinite = cpu::count_block(dk, 1, t.cols * D, t.cols * D);
      info.nonfinite += cpu::count_block(dv, 1, t.cols * Dv, t.cols * Dv);
      info.new_nonfinite = info.nonfinite.total() - before;
      ++st.kv_tiles_done;
      break;
    }
    case StepStage::store_dq: {
      const int64_t n = prm.seqlen_q * D;
      const int64_t before = cpu::count_nonfinite(st.dq_acc.data(), n);
      cpu::backward_postprocess(x, st.dq_acc.data(), n, st.dq.data());
      info.nonfinite = cpu::count_block(st.dq.data(), 1, n, n);
      info.new_nonfinite = info.nonfinite.total() - before;
      break;
    }
    default:
      run_tile_stage(s.stage, tile_of(s.qt, s.jt), info);
      break;
  }
  st.step = info;
  ++mu.position;
}

void BackwardStepper::Impl::run_tile_stage(StepStage stage, const cpu::ScoreTile& t,
                                           StepInfo& info) {
  StepperState& st = mu.st;
  cpu::BackwardTileBuffers& w = mu.tile;
  const cpu::HeadContext& x = op.x;
  const int64_t D = prm.head_dim, Dv = prm.head_dim_v, jt = t.j0 / cpu::kTileCols;
  const float* q_tile = op.q.data() + t.i0 * D;
  const float* do_tile = op.dout.data() + t.i0 * Dv;
  // Counts a freshly computed tile; accumulators report only their new non-finite entries.
  const auto fresh = [&](const float* tile) {
    info.nonfinite = cpu::count_block(tile, t.rows, t.cols, t.ld);
    info.new_nonfinite = info.nonfinite.total();
  };
  // Scores count only where visible: the fill of masked entries is intentional.
  const auto show_scores = [&] {
    copy_compact(w.s.data(), t.rows, t.cols, t.ld, st.s);
    info.nonfinite = cpu::count_visible(prm, t, w.s.data(), st.masked.data());
    info.new_nonfinite = info.nonfinite.total();
  };
  const auto accumulate = [&](float* acc, int64_t n, const auto& update) {
    const int64_t before = cpu::count_nonfinite(acc, n);
    update();
    info.nonfinite = cpu::count_block(acc, 1, n, n);
    info.new_nonfinite = info.nonfinite.total() - before;
  };
  switch (stage) {
    case StepStage::score_tile:
      st.tile_rows = t.rows;
      st.p.clear();
      st.dp.clear();
      st.ds.clear();
      st.masked.resize(count(t.rows * t.cols));
      cpu::mask_classes(x, t, st.masked.data());
      cpu::score_tile(x, t, q_tile, op.kt.data() + jt * D * cpu::kTileCols, cpu::kTileCols,
                      w.s.data(), w.gf.data());
      show_scores();
      break;
    case StepStage::mask_tile:
      cpu::mask_tile(x, t, w.s.data(), w.gf.data());
      show_scores();
      break;
    case StepStage::recompute_p:
      cpu::recompute_p(x, t, w.s.data(), m + t.i0, l + t.i0, w.p.data());
      copy_compact(w.p.data(), t.rows, t.cols, t.ld, st.p);
      fresh(w.p.data());
      break;
    case StepStage::accumulate_dv:
      accumulate(st.dv_acc.data(), t.cols * Dv, [&] {
        cpu::accumulate_dv(x, t, w.p.data(), w.p_lo.data(), do_tile, st.dv_acc.data());
      });
      break;
    case StepStage::compute_dp:
      cpu::compute_dp(x, t, do_tile, op.vt.data() + jt * Dv * cpu::kTileCols, cpu::kTileCols,
                      w.dp.data());
      copy_compact(w.dp.data(), t.rows, t.cols, t.ld, st.dp);
      fresh(w.dp.data());
      break;
    case StepStage::compute_ds:
      cpu::compute_ds(x, t, w.p.data(), w.dp.data(), st.d.data() + t.i0, w.gf.data(), w.ds.data());
      copy_compact(w.ds.data(), t.rows, t.cols, t.ld, st.ds);
      fresh(w.ds.data());
      break;
    case StepStage::accumulate_dq: {
      // The kernel adds kv tile j into partial j % chunks; dQ is their sum in chunk order.
      const int64_t begin = t.i0 * D, n = t.rows * D;
      float* acc = st.dq_acc.data() + begin;
      accumulate(acc, n, [&] {
        cpu::accumulate_dq(x, t, w.ds.data(), op.k.data() + t.j0 * D,
                           partials[count(jt % chunks)].data() + begin);
        std::copy_n(partials[0].data() + begin, n, acc);
        for (int64_t c = 1; c < chunks; ++c) {
          const float* part = partials[count(c)].data() + begin;
          for (int64_t e = 0; e < n; ++e) acc[e] += part[e];
        }
      });
      break;
    }
    case StepStage::accumulate_dk:
      accumulate(st.dk_acc.data(), t.cols * D,
                 [&] { cpu::accumulate_dk(x, t, w.ds.data(), q_tile, st.dk_acc.data()); });
      break;
    default:
      break;
  }
}

BackwardStepper::BackwardStepper(const AttnParams& params, const CpuAttnOptions& options,
                                 const CpuAttnInputs& inputs, const CpuForwardView& fwd, int64_t b,
                                 int64_t h) {
  if (options.mode != Mode::fused) {
    throw std::invalid_argument("BackwardStepper: steps the fused kernel; set Mode::fused");
  }
  if (fwd.o == nullptr || fwd.m == nullptr || fwd.l == nullptr) {
    throw std::invalid_argument("BackwardStepper: fwd needs o, m and l of the fused forward");
  }
  impl_ = std::make_unique<Impl>(params, inputs, fwd, b, h);
}

BackwardStepper::~BackwardStepper() = default;
BackwardStepper::BackwardStepper(BackwardStepper&&) noexcept = default;
BackwardStepper& BackwardStepper::operator=(BackwardStepper&&) noexcept = default;

int64_t BackwardStepper::size() const {
  return static_cast<int64_t>(impl_->plan.size());
}

int64_t BackwardStepper::position() const {
  return impl_->mu.position;
}

bool BackwardStepper::step_forward() {
  if (position() >= size()) return false;
  impl_->run_step();
  return true;
}

bool BackwardStepper::step_back() {
  if (position() == 0) return false;
  impl_->seek(position() - 1);
  return true;
}

void BackwardStepper::seek(int64_t n) {
  impl_->seek(n);
}

bool BackwardStepper::run_to_next_nonfinite() {
  while (step_forward()) {
    if (impl_->mu.st.step.new_nonfinite > 0) return true;
  }
  return false;
}

const StepperState& BackwardStepper::current() const {
  return impl_->mu.st;
}

StepInfo BackwardStepper::describe(int64_t n) const {
  return impl_->describe(n);
}

}  // namespace attnscope
