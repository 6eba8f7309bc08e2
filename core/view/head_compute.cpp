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

// Exact text of a double (hex float), so that keys differ for any different value.
std::string exact(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

// The scale is not part of it: it only enters the params (a scale change keeps the inputs).
std::string inputs_key(const HeadRequest& r) {
  const RunChoice& s = r.run;
  return (s.precision ? std::to_string(static_cast<int>(*s.precision)) : std::string("case")) +
         "/" + std::to_string(fill_key(s.mask_fill));
}

std::string plan_key(const GridPlan& p) {
  const MatrixWindow& w = p.window;
  return std::to_string(w.row_begin) + ":" + std::to_string(w.row_end) + "," +
         std::to_string(w.col_begin) + ":" + std::to_string(w.col_end) + "/" +
         (p.full ? "full" : std::to_string(p.rows) + "x" + std::to_string(p.cols));
}

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
  HeadCache& c = cache != nullptr ? *cache : local;
  HeadResult out;
  PhaseClock clock(out.phases);

  Result<double> scale = resolve_scale(data, request.run);
  if (!scale) return scale.error();
  const std::string in_key = inputs_key(request);
  if (in_key != c.inputs_key_) {
    c.clear();
    Result<CaseInputs> inputs = make_case_inputs(data, request.run, InputValues::none);
    if (!inputs) return inputs.error();
    c.inputs_ = std::make_shared<CaseInputs>(std::move(inputs).value());
    c.inputs_key_ = in_key;
    clock.lap("inputs");
  }
  const std::string head_key =
      in_key + "/" + std::to_string(request.batch) + "/" + std::to_string(request.head);
  if (head_key != c.head_key_) {
    c.slice_ = slice_head(data, *c.inputs_, request.batch, request.head);
    c.head_key_ = head_key;
    clock.lap("head slice");
  }
  c.slice_.params.scale = *scale;
  const std::string scaled_key = head_key + "/" + exact(*scale);
  const HeadSlice& slice = c.slice_;
  CpuAttnOptions opt;
  opt.mode = request.mode();
  opt.threads = request.threads;
  opt.cancelled = request.cancelled;

  const int64_t sq = d.seqlen_q, sk = d.seqlen_k, dh = d.head_dim, dv = d.head_dim_v;
  const GridPlan plan =
      plan_score_grids(request.window, sq, sk, request.out_rows, request.out_cols);
  const std::string kernel_key =
      scaled_key + "/" + std::to_string(static_cast<int>(request.mode()));
  const std::string grids_key = kernel_key + "/" + plan_key(plan);
  const bool forward_only = request.forward_only && !plan.full && request.run.backend.empty() &&
                            !request.run.clip_norm && !request.reference &&
                            kernel_key != c.kernel_key_;
  ScoreSet wanted = plan.full ? kAllScores : request.scores;
  if (forward_only) wanted[2] = wanted[3] = false;  // dP, dS need the backward
  const bool forward_runs = kernel_key != c.forward_key_;
  // The statistics stage stands in for the forward where that is all the request needs.
  const bool stats_only =
      forward_only && forward_runs && request.forward_stats_only && request.mode() == Mode::fused;
  if (forward_runs && kernel_key != c.stats_key_) {  // new kernel inputs: every product is stale
    for (std::string& key : c.grid_keys_) key.clear();
    c.backend_key_.clear();
  }
  if (forward_runs && !(stats_only && kernel_key == c.stats_key_)) {
    c.stats_key_.clear();  // c.cpu_ is overwritten in place: no key until it is whole
    c.forward_key_.clear();
    c.kernel_key_.clear();
    // A pooled S comes from the fused forward's own tiles.
    std::optional<PooledCapture> capture;
    CpuAttnOptions kernel = opt;
    if (!plan.full && wanted[0] && request.mode() == Mode::fused && c.grid_keys_[0] != grids_key) {
      capture = pooled_capture(plan, {true, false, false, false});
      kernel.pooled_s = &*capture;
    }
    if (stats_only) {
      const auto rows = static_cast<size_t>(slice.params.batch * slice.params.heads * sq);
      c.cpu_.lse.resize(rows);
      c.cpu_.m.resize(rows);
      c.cpu_.l.resize(rows);
      cpu_attention_forward(slice.params, kernel, slice.inputs(),
                            {nullptr, c.cpu_.lse.data(), c.cpu_.m.data(), c.cpu_.l.data()});
    } else {
      cpu_attention_forward(slice.params, kernel, slice.inputs(), c.cpu_);
      c.forward_key_ = kernel_key;
    }
    c.stats_key_ = kernel_key;
    if (capture) {
      pooled_score_grids(std::move(capture->result), sq, sk, {true, false, false, false}, c.grids_);
      c.grid_keys_[0] = grids_key;
    }
    if (stats_only) {
      clock.lap(capture ? "cpu stats+pool" : "cpu stats");
    } else if (forward_only) {
      clock.lap(capture ? "cpu fwd+pool" : "cpu fwd");
    }
  }
  if (!forward_only && kernel_key != c.kernel_key_) {
    // Pooled score grids come from the backward's own tiles (no second pass over the head).
    std::optional<PooledCapture> capture;
    CpuAttnOptions kernel = opt;
    ScoreSet pooled{};
    for (int k = 0; k < 4; ++k) pooled[k] = wanted[k] && c.grid_keys_[k] != grids_key;
    if (!plan.full && std::find(pooled.begin(), pooled.end(), true) != pooled.end()) {
      capture = pooled_capture(plan, pooled);
      kernel.pooled = &*capture;
    }
    cpu_attention_backward(slice.params, kernel, slice.inputs(), c.cpu_);
    c.kernel_key_ = kernel_key;
    if (forward_runs) {
      clock.lap(capture ? "cpu fwd+bwd+pool" : "cpu fwd+bwd");
    } else {
      clock.lap(capture ? "cpu bwd+pool" : "cpu bwd");
    }
    if (capture) {
      pooled_score_grids(std::move(capture->result), sq, sk, pooled, c.grids_);
      for (int k = 0; k < 4; ++k) {
        if (pooled[k]) c.grid_keys_[k] = grids_key;
      }
      clock.lap("score grids");
    }
  }

  ScoreSet missing{};
  for (int k = 0; k < 4; ++k) missing[k] = wanted[k] && c.grid_keys_[k] != grids_key;
  if (std::find(missing.begin(), missing.end(), true) != missing.end()) {
    const ForwardRows rows{c.cpu_.m.data(), c.cpu_.l.data(),
                           forward_only ? nullptr : c.cpu_.d.data()};
    score_grids(slice, opt, plan, &rows, missing, c.grids_);
    for (int k = 0; k < 4; ++k) {
      if (missing[k]) c.grid_keys_[k] = grids_key;
    }
    clock.lap("score grids");
  }

  const std::string backend_key = kernel_key + "/" + request.run.backend;
  if (!forward_only && backend_key != c.backend_key_) {
    clock.skip();
    if (request.run.backend.empty()) {
      c.backend_ = cpu_outputs(c.cpu_);
    } else {
      Result<HeadOutputs> run =
          run_backend(slice, request.run.backend, request.mode(), request.threads);
      if (!run) return run.error();
      c.backend_ = std::move(run).value();
      clock.lap("backend");
    }
    c.backend_key_ = backend_key;
  }

  if (request.reference && c.reference_key_ != scaled_key) {
    clock.skip();
    c.reference_ = reference_outputs(slice);
    c.reference_key_ = scaled_key;
    clock.lap("reference");
  }

  const std::string case_grads_key = in_key + "/" + exact(*scale) + "/" +
                                     std::to_string(static_cast<int>(request.mode())) + "/" +
                                     request.run.backend;
  if (request.run.clip_norm && case_grads_key != c.case_grads_key_) {
    clock.skip();
    Result<CaseInputs> whole = make_case_inputs(data, request.run);  // every head, in fp64
    if (!whole) return whole.error();
    Result<CaseGradients> grads = case_gradients(
        *whole, *scale, request.mode(), request.run.backend, request.threads, request.cancelled);
    if (!grads) return grads.error();
    c.case_grads_ = std::move(grads).value();
    c.case_grads_key_ = case_grads_key;
    clock.lap("case gradients");
  }
  const std::string case_clips_key =
      case_grads_key + "/" +
      (request.run.clip_norm ? exact(*request.run.clip_norm) : std::string()) + "/" +
      clip_scope_name(request.run.clip_scope);
  if (request.run.clip_norm && case_clips_key != c.case_clips_key_) {
    clock.skip();
    c.case_clips_ = case_clips(c.case_grads_, request.run.clip_scope, *request.run.clip_norm,
                               slice.params.precision);
    c.case_clips_key_ = case_clips_key;
    clock.lap("case clip");
  }

  clock.skip();
  out.request = request;
  out.case_path = data.info.path;
  out.precision = slice.params.precision;
  out.scale = slice.params.scale;
  out.mask_fill = slice.params.mask_fill;
  out.has_dout = c.inputs_->has_dout;
  out.seqlen_q = sq;
  out.seqlen_k = sk;
  out.head_dim = dh;
  out.head_dim_v = dv;
  out.backend = forward_only ? "cpu" : c.backend_.backend;
  out.gradients = !forward_only;
  out.outputs = !stats_only;
  SharedGrid* shown[] = {&out.s, &out.p, &out.dp, &out.ds};
  for (int k = 0; k < 4; ++k) {
    if (c.grid_keys_[k] == grids_key) *shown[k] = c.grids_[k];  // shared, not copied
  }
  // A copy: clipping scales it in place.
  HeadOutputs r =
      forward_only
          ? HeadOutputs{"cpu", out.outputs ? c.cpu_.o : std::vector<float>{}, c.cpu_.lse, {}, {},
                        {}}
          : c.backend_;
  if (request.run.clip_norm) {
    out.clip = c.case_clips_[covering_clip(c.case_grads_, request.run.clip_scope, request.batch,
                                           request.head)];
    apply_clip(*out.clip, out.precision, r.dq, r.dk, r.dv);
  }
  if (request.reference) {
    const HeadReference& ref = c.reference_;
    out.o_err = error_grid("O err", r.o, ref.o, sq, dv);
    out.dq_err = error_grid("dQ err", r.dq, ref.dq, sq, dh);
    out.dk_err = error_grid("dK err", r.dk, ref.dk, sk, dh);
    out.dv_err = error_grid("dV err", r.dv, ref.dv, sk, dv);
  }
  if (out.outputs) {
    out.o_norm = row_norms(r.o, sq, dv);
    out.o = dense_grid("O", std::move(r.o), sq, dv);
  }
  if (out.gradients) {
    out.dq_norm = row_norms(r.dq, sq, dh);
    out.dq = dense_grid("dQ", std::move(r.dq), sq, dh);
    out.dk = dense_grid("dK", std::move(r.dk), sk, dh);
    out.dv = dense_grid("dV", std::move(r.dv), sk, dv);
  }
  out.m = c.cpu_.m;
  out.lse = std::move(r.lse);
  out.l = c.cpu_.l;
  clock.lap("grids");
  out.elapsed_ms = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  return out;
}

}  // namespace attnscope
