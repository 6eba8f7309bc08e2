// Registry entries of the GPU variants and the run of the own CUDA fused kernel (see
// core/cuda_variants.h).
#include "core/cuda_variants.h"

#include <vector>

#include "kernels/cuda/cuda_attention.h"

namespace attnscope {
namespace {

std::vector<float> to_float(const double* x, int64_t n) {
  return std::vector<float>(x, x + n);
}

std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// Inputs converted to fp32 once and uploaded (rounded to the precision) by CudaAttention;
// forward() / backward() launch and wait, outputs() downloads.
class CudaFusedRun final : public VariantRun {
 public:
  CudaFusedRun(const AttnParams& params, const RunConfig& config, const VariantInputs& in)
      : params_(with_precision(params, config.precision)) {
    const int64_t B = params.batch, H = params.heads, Hk = params.kv_heads;
    const int64_t Sq = params.seqlen_q, Sk = params.seqlen_k;
    const std::vector<float> q = to_float(in.q, B * H * Sq * params.head_dim);
    const std::vector<float> k = to_float(in.k, B * Hk * Sk * params.head_dim);
    const std::vector<float> v = to_float(in.v, B * Hk * Sk * params.head_dim_v);
    std::vector<float> dout;
    if (in.dout != nullptr) dout = to_float(in.dout, B * H * Sq * params.head_dim_v);
    run_ = std::make_unique<cuda::CudaAttention>(
        params_, CpuAttnInputs{q.data(), k.data(), v.data(), dout.empty() ? nullptr : dout.data()},
        config.instrument);
  }

  void forward() override { run_->forward(); }
  void backward() override { run_->backward(); }

  VariantOutputs outputs() const override {
    const cuda::CudaOutputs out = run_->outputs();
    return {to_double(out.o), to_double(out.lse), to_double(out.dq), to_double(out.dk),
            to_double(out.dv)};
  }

 private:
  static AttnParams with_precision(AttnParams p, Precision precision) {
    p.precision = precision;
    return p;
  }

  AttnParams params_;
  std::unique_ptr<cuda::CudaAttention> run_;
};

// Support check of an SDPA backend: its limits, then dropout and the backward's P. Its kernels
// draw their own dropout mask and recompute P from the LSE.
std::function<Support(const AttnParams&)> torch_cuda_check(const std::string& backend) {
  return [backend](const AttnParams& p) {
    const std::string why = torch_cuda_unsupported(backend, p);
    if (!why.empty()) return Support::no(why);
    const std::string name = "torch-cuda-" + backend;
    const Support dropout = refuse_dropout_keep(
        name, p, "PyTorch's CUDA SDPA kernels draw their own dropout mask (Philox RNG)");
    return dropout ? fixed_backward_p(name, BackwardP::from_lse, p) : dropout;
  };
}

// The own CUDA kernel: its limits, no dropout, P from the forward's fp32 m and l.
Support cuda_fused_check(const AttnParams& p) {
  const std::string why = cuda::unsupported_reason(p);
  if (!why.empty()) return Support::no("cuda-fused: " + why);
  const Support dropout = refuse_dropout_keep("cuda-fused", p, "the CUDA kernel has no dropout");
  return dropout ? fixed_backward_p("cuda-fused", BackwardP::saved, p) : dropout;
}

PrepareFn torch_cuda_prepare(const std::string& backend) {
  return [backend](const AttnParams& params, const RunConfig& config, const VariantInputs& in) {
    return make_torch_cuda_run(backend, params, config, in);
  };
}

}  // namespace

std::unique_ptr<VariantRun> make_cuda_fused_run(const AttnParams& params, const RunConfig& config,
                                                const VariantInputs& inputs) {
  return std::make_unique<CudaFusedRun>(params, config, inputs);
}

void add_cuda_variants(std::vector<KernelVariant>& t) {
  if (cuda::device_count() == 0) return;
  const std::vector<Precision> low = {Precision::f32, Precision::f16, Precision::bf16};
  t.push_back(make_variant(
      {"cuda-fused", "cuda",
       "FlashAttention-2 on CUDA: fp32 accumulation, stores rounded once, P from m and l",
       "own CUDA kernel (" + cuda::device_description() + "), WMMA tensor cores for fp16/bf16",
       "no dropout; the backward takes P from the forward's fp32 m and l (saved), so "
       "backward_p = from_lse is refused where it matters"},
      low, {Mode::fused}, cuda_fused_check, make_cuda_fused_run));
  if (!load_torch_cuda().empty()) return;
  const std::vector<Precision> half = {Precision::f16, Precision::bf16};
  const std::string notes =
      "its own dropout RNG (a keep-mask is refused); backward_p = saved is refused where it "
      "matters";
  t.push_back(make_variant(
      {"torch-cuda-flash", "torch-cuda", "FlashAttention-2 on CUDA, P from the LSE in the backward",
       "PyTorch SDPA flash attention on CUDA (at::_scaled_dot_product_flash_attention)", notes},
      half, {Mode::fused}, torch_cuda_check("flash"), torch_cuda_prepare("flash")));
  t.push_back(make_variant({"torch-cuda-efficient", "torch-cuda",
                            "memory-efficient attention on CUDA, P from the LSE in the backward",
                            "PyTorch SDPA memory-efficient attention on CUDA "
                            "(at::_scaled_dot_product_efficient_attention)",
                            notes},
                           low, {Mode::fused}, torch_cuda_check("efficient"),
                           torch_cuda_prepare("efficient")));
  t.push_back(make_variant(
      {"torch-cuda-cudnn", "torch-cuda", "cuDNN fused attention, P from the LSE in the backward",
       "PyTorch SDPA cuDNN attention on CUDA (at::_scaled_dot_product_cudnn_attention)", notes},
      half, {Mode::fused}, torch_cuda_check("cudnn"), torch_cuda_prepare("cudnn")));
}

}  // namespace attnscope
