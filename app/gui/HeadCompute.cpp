// Recomputation of one (batch, head) for the views: the head is cut out of the case into a
// B = H = Hk = 1 problem (HeadSlice), the CPU kernels give S, P, dP, dS and the row series, the
// chosen registry variant (default: the own CPU kernel) gives O, LSE and the gradients.
#include "app/gui/HeadCompute.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "app/gui/HeadGrids.h"
#include "app/gui/HeadSlice.h"
#include "core/kernel_registry.h"
#include "kernels/reference/reference_attention.h"

namespace attnscope {
namespace {

MatrixWindow resolve(const MatrixWindow& w, int64_t sq, int64_t sk) {
  MatrixWindow r;
  r.row_begin = std::clamp<int64_t>(w.row_begin, 0, sq - 1);
  r.row_end = w.row_end < 0 ? sq : std::clamp<int64_t>(w.row_end, r.row_begin + 1, sq);
  r.col_begin = std::clamp<int64_t>(w.col_begin, 0, sk - 1);
  r.col_end = w.col_end < 0 ? sk : std::clamp<int64_t>(w.col_end, r.col_begin + 1, sk);
  return r;
}

void score_grids(const HeadSlice& slice, const CpuAttnOptions& opt, const HeadRequest& req,
                 HeadResult& out) {
  const int64_t sq = slice.params.seqlen_q, sk = slice.params.seqlen_k;
  const MatrixWindow w = resolve(req.window, sq, sk);
  const int64_t rows = w.row_end - w.row_begin, cols = w.col_end - w.col_begin;
  const int64_t out_rows = std::max<int64_t>(1, req.out_rows);
  const int64_t out_cols = std::max<int64_t>(1, req.out_cols);
  MatrixGrid* grids[] = {&out.s, &out.p, &out.dp, &out.ds};
  if (rows <= out_rows && cols <= out_cols) {
    HeadMatrices hm = cpu_head_matrices(slice.params, opt, slice.inputs(), 0, 0, w);
    std::vector<float>* mats[] = {&hm.s, &hm.p, &hm.dp, &hm.ds};
    for (int k = 0; k < 4; ++k) {
      *grids[k] = full_grid(kScoreMatrices[k], std::move(*mats[k]), hm.masked, w.row_begin, rows,
                            w.col_begin, cols, sq, sk);
    }
    return;
  }
  const PooledHeadMatrices pm =
      cpu_pooled_matrices(slice.params, opt, slice.inputs(), 0, 0, std::min(rows, out_rows),
                          std::min(cols, out_cols), w);
  const PooledMatrix* mats[] = {&pm.s, &pm.p, &pm.dp, &pm.ds};
  for (int k = 0; k < 4; ++k) *grids[k] = pooled_grid(kScoreMatrices[k], pm, *mats[k], sq, sk);
}

std::vector<float> to_f32(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

// Replaces the CPU kernel's O, LSE and gradients with those of a registry variant.
Status run_backend(const HeadSlice& slice, const HeadRequest& req, CpuAttnResult& r,
                   std::string& ran) {
  const KernelVariant* variant = find_variant(req.backend);
  if (variant == nullptr) {
    return make_error(ErrorCode::invalid_argument, "unknown backend '" + req.backend + "'",
                      "pick one of the backend list (core/kernel_registry)");
  }
  RunConfig config;
  config.precision =
      variant->precisions.size() == 1 ? variant->precisions.front() : slice.params.precision;
  config.mode = variant->modes.empty() ? req.mode : variant->modes.front();
  config.threads = req.threads;
  AttnParams params = slice.params;
  params.precision = config.precision;
  Result<VariantOutputs> out = run_variant(*variant, params, config, slice.variant_inputs());
  if (!out) return out.error();
  r.o = to_f32(out->o);
  r.lse = to_f32(out->lse);
  r.dq = to_f32(out->dq);
  r.dk = to_f32(out->dk);
  r.dv = to_f32(out->dv);
  ran = variant->name;
  return Ok{};
}

MatrixGrid error_grid(const char* name, const std::vector<float>& x, const std::vector<double>& ref,
                      int64_t rows, int64_t cols) {
  std::vector<float> err(x.size());
  for (size_t e = 0; e < x.size(); ++e) err[e] = static_cast<float>(x[e] - ref[e]);
  return dense_grid(name, std::move(err), rows, cols);
}

}  // namespace

const MatrixGrid* HeadResult::grid(const std::string& name) const {
  const MatrixGrid* all[] = {&s, &p, &dp, &ds, &o, &dq, &dk, &dv, &o_err, &dq_err};
  for (const MatrixGrid* g : all) {
    if (g->name == name) return g;
  }
  return nullptr;
}

Result<HeadResult> compute_head(const CaseData& data, const HeadRequest& request) {
  const auto started = std::chrono::steady_clock::now();
  const CaseDims& d = data.info.dims;
  if (request.batch < 0 || request.batch >= d.batch || request.head < 0 ||
      request.head >= d.heads) {
    return make_error(ErrorCode::invalid_argument,
                      data.info.path + ": (batch " + std::to_string(request.batch) + ", head " +
                          std::to_string(request.head) + ") is outside B=" +
                          std::to_string(d.batch) + " H=" + std::to_string(d.heads),
                      "pick a batch in [0, B) and a head in [0, H)");
  }
  Result<CaseInputs> inputs = make_case_inputs(data, request.settings);
  if (!inputs) return inputs.error();
  const HeadSlice slice = slice_head(*inputs, request.batch, request.head);
  CpuAttnOptions opt;
  opt.mode = request.mode;
  opt.threads = request.threads;

  HeadResult out;
  out.request = request;
  out.case_path = data.info.path;
  out.precision = slice.params.precision;
  out.scale = slice.params.scale;
  out.has_dout = inputs->has_dout;
  const int64_t sq = d.seqlen_q, sk = d.seqlen_k, dh = d.head_dim, dv = d.head_dim_v;
  out.seqlen_q = sq;
  out.seqlen_k = sk;
  out.head_dim = dh;
  out.head_dim_v = dv;
  score_grids(slice, opt, request, out);

  CpuAttnResult r = cpu_attention(slice.params, opt, slice.inputs());
  if (!request.backend.empty()) {
    if (Status s = run_backend(slice, request, r, out.backend); !s) return s.error();
  }
  if (request.clip_norm) {
    const std::vector<GradientRef> grads = {
        {"dQ", r.dq.data(), sq * dh}, {"dK", r.dk.data(), sk * dh}, {"dV", r.dv.data(), sk * dv}};
    out.clip = clip_gradients(grads, *request.clip_norm, out.precision);
  }
  if (request.reference) {
    const ReferenceTrace ref =
        reference_attention(slice.params, slice.q64.data(), slice.k64.data(), slice.v64.data(),
                            slice.dout64.empty() ? nullptr : slice.dout64.data());
    out.o_err = error_grid("O err", r.o, ref.o, sq, dv);
    out.dq_err = error_grid("dQ err", r.dq, ref.dq, sq, dh);
  }
  out.o_norm = row_norms(r.o, sq, dv);
  out.dq_norm = row_norms(r.dq, sq, dh);
  out.o = dense_grid("O", std::move(r.o), sq, dv);
  out.dq = dense_grid("dQ", std::move(r.dq), sq, dh);
  out.dk = dense_grid("dK", std::move(r.dk), sk, dh);
  out.dv = dense_grid("dV", std::move(r.dv), sk, dv);
  out.m = std::move(r.m);
  out.lse = std::move(r.lse);
  out.l = std::move(r.l);
  out.elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  return out;
}

}  // namespace attnscope
