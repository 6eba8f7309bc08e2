// Recomputation of one (batch, head) for the views: the head is cut out of the case into a
// B = H = Hk = 1 problem (HeadSlice); the CPU kernel's forward + backward runs once (the
// forward alone first when asked) and pools the score grids on the way (or its m, l, D feed
// their recomputation: no second forward); the chosen registry variant (default: the own CPU
// kernel) gives O, LSE and the gradients. Each stage is skipped when the cache holds it for the
// same key (see HeadCache).
#include "core/view/head_compute.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "core/view/head_grids.h"

namespace attnscope {
namespace {

using Clock = std::chrono::steady_clock;

// Collects HeadPhase entries: each call to lap() closes the phase started by the previous one.
class PhaseClock {
 public:
  explicit PhaseClock(std::vector<HeadPhase>& phases) : phases_(phases) {}
  void lap(const char* name) {
    const Clock::time_point now = Clock::now();
    phases_.push_back({name, std::chrono::duration<double, std::milli>(now - last_).count()});
    last_ = now;
  }
  void skip() { last_ = Clock::now(); }

 private:
  std::vector<HeadPhase>& phases_;
  Clock::time_point last_ = Clock::now();
};

// Pooling of the `which` score matrices of a pooled plan by a kernel pass on the way.
PooledCapture pooled_capture(const GridPlan& plan, const ScoreSet& which) {
  PooledCapture capture;
  capture.out_rows = plan.rows;
  capture.out_cols = plan.cols;
  capture.window = plan.window;
  capture.which = score_grid_selection(which);
  return capture;
}

HeadOutputs cpu_outputs(const CpuAttnResult& r) {
  return {"cpu", r.o, r.lse, r.dq, r.dk, r.dv};
}

}  // namespace

const MatrixGrid& HeadResult::grid(HeadView view) const {
  switch (view) {
    case HeadView::s:
      return *s;
    case HeadView::p:
      return *p;
    case HeadView::dp:
      return *dp;
    case HeadView::ds:
      return *ds;
    case HeadView::o:
      return o;
    case HeadView::dq:
      return dq;
    case HeadView::dk:
      return dk;
    case HeadView::dv:
      return dv;
    case HeadView::o_err:
      return o_err;
    case HeadView::dq_err:
      return dq_err;
    case HeadView::dk_err:
      return dk_err;
    case HeadView::dv_err:
      return dv_err;
  }
  return *s;
}

const MatrixGrid* HeadResult::scoreGrid() const {
  for (const SharedGrid* g : {&s, &p, &dp, &ds}) {
    if (!(*g)->empty()) return g->get();
  }
  return s.get();
}

// One call of compute_head: its stages in order, each run unless the cache holds its product
// for the same key (head_keys.h), then the result assembled from the cache.
class HeadComputation {
 public:
  HeadComputation(const CaseData& data, const HeadRequest& request, HeadCache& cache,
                  HeadResult& out)
      : data_(data), request_(request), c_(cache), out_(out), clock_(out.phases) {}

  Status run() {
    Result<double> scale = resolve_scale(data_, request_.run);
    if (!scale) return scale.error();
    scale_ = *scale;
    if (Status st = inputs(); !st) return st;
    slice();
    plan_ = plan_score_grids(request_.window, dims().seqlen_q, dims().seqlen_k, request_.out_rows,
                             request_.out_cols);
    kernel_key_ = KernelKey{ScaledKey{head_key_, scale_}, request_.mode()};
    grids_key_ = GridsKey{kernel_key_, plan_};
    plan_kernel();
    forward();
    backward();
    grids();
    if (Status st = backend(); !st) return st;
    reference();
    if (Status st = case_clip(); !st) return st;
    assemble();
    return Ok{};
  }

 private:
  const CaseDims& dims() const { return data_.info.dims; }
  CpuAttnOptions kernel_options() const {
    CpuAttnOptions opt;
    opt.mode = request_.mode();
    opt.threads = request_.threads;
    opt.cancelled = request_.cancelled;
    return opt;
  }

  // The case's params and masks at the run's precision and mask fill (values stay in the case).
  Status inputs() {
    in_key_ = InputsKey{request_.run.precision, request_.run.mask_fill};
    if (c_.inputs_key_ == in_key_) return Ok{};
    c_.clear();
    Result<CaseInputs> made = make_case_inputs(data_, request_.run, InputValues::none);
    if (!made) return made.error();
    c_.inputs_ = std::make_shared<CaseInputs>(std::move(made).value());
    c_.inputs_key_ = in_key_;
    clock_.lap("inputs");
    return Ok{};
  }

  void slice() {
    head_key_ = HeadKey{in_key_, request_.batch, request_.head};
    if (c_.head_key_ != head_key_) {
      c_.slice_ = slice_head(data_, *c_.inputs_, request_.batch, request_.head);
      c_.head_key_ = head_key_;
      clock_.lap("head slice");
    }
    c_.slice_.params.scale = scale_;
  }

  // Which kernel passes the request needs: the forward alone (a slider drag redraws S, P, O
  // sooner), its statistics alone (all the S view shows), or forward and backward.
  void plan_kernel() {
    const Mode mode = request_.mode();
    forward_only_ = request_.forward_only && !plan_.full && request_.run.backend.empty() &&
                    !request_.run.clip_norm && !request_.reference && c_.kernel_key_ != kernel_key_;
    wanted_ = plan_.full ? kAllScores : request_.scores;
    if (forward_only_) wanted_[2] = wanted_[3] = false;  // dP, dS need the backward
    forward_runs_ = c_.forward_key_ != kernel_key_;
    stats_only_ =
        forward_only_ && forward_runs_ && request_.forward_stats_only && mode == Mode::fused;
    if (forward_runs_ && c_.stats_key_ != kernel_key_) {  // new kernel inputs: all is stale
      for (auto& key : c_.grid_keys_) key.reset();
      c_.backend_key_.reset();
    }
  }

  // The forward (or its statistics), pooling S on the way from the fused forward's own tiles.
  void forward() {
    if (!forward_runs_ || (stats_only_ && c_.stats_key_ == kernel_key_)) return;
    c_.stats_key_.reset();  // c_.cpu_ is overwritten in place: no key until it is whole
    c_.forward_key_.reset();
    c_.kernel_key_.reset();
    const HeadSlice& slice = c_.slice_;
    std::optional<PooledCapture> capture;
    CpuAttnOptions kernel = kernel_options();
    if (!plan_.full && wanted_[0] && request_.mode() == Mode::fused &&
        c_.grid_keys_[0] != grids_key_) {
      capture = pooled_capture(plan_, {true, false, false, false});
      kernel.pooled_s = &*capture;
    }
    if (stats_only_) {
      const auto rows =
          static_cast<size_t>(slice.params.batch * slice.params.heads * dims().seqlen_q);
      c_.cpu_.lse.resize(rows);
      c_.cpu_.m.resize(rows);
      c_.cpu_.l.resize(rows);
      cpu_attention_forward(slice.params, kernel, slice.inputs(),
                            {nullptr, c_.cpu_.lse.data(), c_.cpu_.m.data(), c_.cpu_.l.data()});
    } else {
      cpu_attention_forward(slice.params, kernel, slice.inputs(), c_.cpu_);
      c_.forward_key_ = kernel_key_;
    }
    c_.stats_key_ = kernel_key_;
    if (capture) {
      pooled_score_grids(std::move(capture->result), dims().seqlen_q, dims().seqlen_k,
                         {true, false, false, false}, c_.grids_);
      c_.grid_keys_[0] = grids_key_;
    }
    if (stats_only_) {
      clock_.lap(capture ? "cpu stats+pool" : "cpu stats");
    } else if (forward_only_) {
      clock_.lap(capture ? "cpu fwd+pool" : "cpu fwd");
    }
  }

  // The backward, pooling the other wanted score grids from its own tiles (no second pass).
  void backward() {
    if (forward_only_ || c_.kernel_key_ == kernel_key_) return;
    std::optional<PooledCapture> capture;
    CpuAttnOptions kernel = kernel_options();
    ScoreSet pooled{};
    for (int k = 0; k < 4; ++k) pooled[k] = wanted_[k] && c_.grid_keys_[k] != grids_key_;
    if (!plan_.full && std::find(pooled.begin(), pooled.end(), true) != pooled.end()) {
      capture = pooled_capture(plan_, pooled);
      kernel.pooled = &*capture;
    }
    cpu_attention_backward(c_.slice_.params, kernel, c_.slice_.inputs(), c_.cpu_);
    c_.kernel_key_ = kernel_key_;
    if (forward_runs_) {
      clock_.lap(capture ? "cpu fwd+bwd+pool" : "cpu fwd+bwd");
    } else {
      clock_.lap(capture ? "cpu bwd+pool" : "cpu bwd");
    }
    if (capture) {
      pooled_score_grids(std::move(capture->result), dims().seqlen_q, dims().seqlen_k, pooled,
                         c_.grids_);
      for (int k = 0; k < 4; ++k) {
        if (pooled[k]) c_.grid_keys_[k] = grids_key_;
      }
      clock_.lap("score grids");
    }
  }

  // The wanted score grids no kernel pass pooled: recomputed from the forward's m, l (and D).
  void grids() {
    ScoreSet missing{};
    for (int k = 0; k < 4; ++k) missing[k] = wanted_[k] && c_.grid_keys_[k] != grids_key_;
    if (std::find(missing.begin(), missing.end(), true) == missing.end()) return;
    const ForwardRows rows{c_.cpu_.m.data(), c_.cpu_.l.data(),
                           forward_only_ ? nullptr : c_.cpu_.d.data()};
    score_grids(c_.slice_, kernel_options(), plan_, &rows, missing, c_.grids_);
    for (int k = 0; k < 4; ++k) {
      if (missing[k]) c_.grid_keys_[k] = grids_key_;
    }
    clock_.lap("score grids");
  }

  Status backend() {
    const BackendKey key{kernel_key_, request_.run.backend};
    if (forward_only_ || c_.backend_key_ == key) return Ok{};
    clock_.skip();
    if (request_.run.backend.empty()) {
      c_.backend_ = cpu_outputs(c_.cpu_);
    } else {
      Result<HeadOutputs> run =
          run_backend(c_.slice_, request_.run.backend, request_.mode(), request_.threads);
      if (!run) return run.error();
      c_.backend_ = std::move(run).value();
      clock_.lap("backend");
    }
    c_.backend_key_ = key;
    return Ok{};
  }

  void reference() {
    const ScaledKey key{head_key_, scale_};
    if (!request_.reference || c_.reference_key_ == key) return;
    clock_.skip();
    c_.reference_ = reference_outputs(c_.slice_);
    c_.reference_key_ = key;
    clock_.lap("reference");
  }

  // The whole case's gradients (every head) and their clip calls.
  Status case_clip() {
    if (!request_.run.clip_norm) return Ok{};
    const CaseGradsKey grads_key{in_key_, scale_, request_.mode(), request_.run.backend};
    if (c_.case_grads_key_ != grads_key) {
      clock_.skip();
      // fp64 values only for a backend: the CPU kernel reads fp32 from the case.
      Result<CaseInputs> whole =
          make_case_inputs(data_, request_.run,
                           request_.run.backend.empty() ? InputValues::none : InputValues::fp64);
      if (!whole) return whole.error();
      Result<CaseGradients> grads =
          case_gradients(data_, *whole, scale_, request_.mode(), request_.run.backend,
                         request_.threads, request_.cancelled);
      if (!grads) return grads.error();
      c_.case_grads_ = std::move(grads).value();
      c_.case_grads_key_ = grads_key;
      clock_.lap("case gradients");
    }
    const CaseClipsKey clips_key{grads_key, *request_.run.clip_norm, request_.run.clip_scope};
    if (c_.case_clips_key_ != clips_key) {
      clock_.skip();
      c_.case_clips_ = case_clips(c_.case_grads_, request_.run.clip_scope, *request_.run.clip_norm,
                                  c_.slice_.params.precision);
      c_.case_clips_key_ = clips_key;
      clock_.lap("case clip");
    }
    return Ok{};
  }

  // The result from the cache: grids shared, outputs copied (clipping scales them in place),
  // error grids and row norms computed (cheap, always rerun).
  void assemble() {
    clock_.skip();
    const HeadSlice& slice = c_.slice_;
    const int64_t sq = dims().seqlen_q, sk = dims().seqlen_k, dh = dims().head_dim,
                  dv = dims().head_dim_v;
    out_.request = request_;
    out_.case_path = data_.info.path;
    out_.precision = slice.params.precision;
    out_.scale = slice.params.scale;
    out_.mask_fill = slice.params.mask_fill;
    out_.has_dout = c_.inputs_->has_dout;
    out_.seqlen_q = sq;
    out_.seqlen_k = sk;
    out_.head_dim = dh;
    out_.head_dim_v = dv;
    out_.backend = forward_only_ ? "cpu" : c_.backend_.backend;
    out_.gradients = !forward_only_;
    out_.outputs = !stats_only_;
    SharedGrid* shown[] = {&out_.s, &out_.p, &out_.dp, &out_.ds};
    for (int k = 0; k < 4; ++k) {
      if (c_.grid_keys_[k] == grids_key_) *shown[k] = c_.grids_[k];  // shared, not copied
    }
    HeadOutputs r = forward_only_
                        ? HeadOutputs{"cpu",       out_.outputs ? c_.cpu_.o : std::vector<float>{},
                                      c_.cpu_.lse, {},
                                      {},          {}}
                        : c_.backend_;
    if (request_.run.clip_norm) {
      out_.clip = c_.case_clips_[covering_clip(c_.case_grads_, request_.run.clip_scope,
                                               request_.batch, request_.head)];
      apply_clip(*out_.clip, out_.precision, r.dq, r.dk, r.dv);
    }
    if (request_.reference) {
      const HeadReference& ref = c_.reference_;
      out_.o_err = error_grid("O err", r.o, ref.o, sq, dv);
      out_.dq_err = error_grid("dQ err", r.dq, ref.dq, sq, dh);
      out_.dk_err = error_grid("dK err", r.dk, ref.dk, sk, dh);
      out_.dv_err = error_grid("dV err", r.dv, ref.dv, sk, dv);
    }
    if (out_.outputs) {
      out_.o_norm = row_norms(r.o, sq, dv);
      out_.o = dense_grid("O", std::move(r.o), sq, dv);
    }
    if (out_.gradients) {
      out_.dq_norm = row_norms(r.dq, sq, dh);
      out_.dq = dense_grid("dQ", std::move(r.dq), sq, dh);
      out_.dk = dense_grid("dK", std::move(r.dk), sk, dh);
      out_.dv = dense_grid("dV", std::move(r.dv), sk, dv);
    }
    out_.m = c_.cpu_.m;
    out_.lse = std::move(r.lse);
    out_.l = c_.cpu_.l;
    clock_.lap("grids");
  }

  const CaseData& data_;
  const HeadRequest& request_;
  HeadCache& c_;
  HeadResult& out_;
  PhaseClock clock_;
  double scale_ = 1.0;
  InputsKey in_key_;
  HeadKey head_key_;
  KernelKey kernel_key_;
  GridsKey grids_key_;
  GridPlan plan_;
  ScoreSet wanted_{};
  bool forward_only_ = false, forward_runs_ = false, stats_only_ = false;
};

Result<HeadResult> compute_head(const CaseData& data, const HeadRequest& request,
                                HeadCache* cache) {
  const Clock::time_point started = Clock::now();
  const CaseDims& d = data.info.dims;
  if (request.batch < 0 || request.batch >= d.batch || request.head < 0 ||
      request.head >= d.heads) {
    return make_error(ErrorCode::invalid_argument,
                      data.info.path + ": (batch " + std::to_string(request.batch) + ", head " +
                          std::to_string(request.head) + ") is outside B=" +
                          std::to_string(d.batch) + " H=" + std::to_string(d.heads),
                      "pick a batch in [0, B) and a head in [0, H)");
  }
  HeadCache local;
  HeadResult out;
  HeadComputation stages(data, request, cache != nullptr ? *cache : local, out);
  if (Status st = stages.run(); !st) return st.error();
  out.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  return out;
}

}  // namespace attnscope
