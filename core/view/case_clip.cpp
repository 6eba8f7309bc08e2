// The whole case's gradients computed like a head's, and the clip call covering that head (see
// case_clip.h).
#include "core/view/case_clip.h"

#include "core/kernel_registry.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {
namespace {

std::vector<float> to_floats(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

}  // namespace

Result<CaseGradients> case_gradients(const CaseData& data, const CaseInputs& inputs, double scale,
                                     Mode mode, const std::string& backend, int threads,
                                     const std::function<bool()>& cancelled) {
  AttnParams params = inputs.params;
  params.scale = scale;
  CaseGradients g = CaseGradients::shaped_like(params);
  if (backend.empty()) {
    CpuAttnOptions opt;
    opt.mode = mode;
    opt.threads = threads;
    opt.cancelled = cancelled;
    CpuAttnResult r = cpu_attention(params, opt, KernelInputs(data).view());
    g.dq = std::move(r.dq);
    g.dk = std::move(r.dk);
    g.dv = std::move(r.dv);
    return g;
  }
  const VariantInputs in{inputs.q.data(), inputs.k.data(), inputs.v.data(),
                         inputs.has_dout ? inputs.dout.data() : nullptr};
  Result<VariantOutputs> run = run_backend_variant(backend, params, mode, threads, in);
  if (!run) return run.error();
  g.dq = to_floats(run->dq);
  g.dk = to_floats(run->dk);
  g.dv = to_floats(run->dv);
  return g;
}

std::vector<ClipResult> case_clips(const CaseGradients& grads, ClipScope scope, double max_norm,
                                   Precision precision) {
  CaseGradients copy = grads;
  return clip_case_gradients(copy, scope, max_norm, precision);
}

size_t covering_clip(const CaseGradients& grads, ClipScope scope, int64_t b, int64_t h) {
  if (scope == ClipScope::whole_case) return 0;
  const int64_t g = h / (grads.heads / grads.kv_heads);  // kv head read by query head h
  return static_cast<size_t>(b * grads.kv_heads + g);    // clip_case_gradients' (b, g) order
}

void apply_clip(const ClipResult& clip, Precision precision, std::vector<float>& dq,
                std::vector<float>& dk, std::vector<float>& dv) {
  scale_gradients({{"dQ", dq.data(), static_cast<int64_t>(dq.size())},
                   {"dK", dk.data(), static_cast<int64_t>(dk.size())},
                   {"dV", dv.data(), static_cast<int64_t>(dv.size())}},
                  clip.coef, precision);
}

}  // namespace attnscope
