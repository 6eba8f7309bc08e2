// PyTorch's CUDA SDPA backends as registry runs (see core/cuda_variants.h): flash,
// memory-efficient and cuDNN through their ATen entry points on CUDA tensors, so no backend
// is picked silently. LibTorch's CUDA library is loaded at run time only on GPU machines, so
// CPU-only binaries never pay for it. GQA: K, V repeated per query head, dK, dV summed back.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <dlfcn.h>

#include <array>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/cuda_variants.h"
#include "kernels/cuda/cuda_attention.h"

namespace attnscope {
namespace {

at::ScalarType dtype_of(Precision p) {
  return p == Precision::f16 ? at::kHalf : p == Precision::bf16 ? at::kBFloat16 : at::kFloat;
}

at::Tensor to_cuda(const double* data, at::IntArrayRef shape, at::ScalarType type) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  return at::from_blob(const_cast<double*>(data), shape, f64).to(type).to(at::Device(at::kCUDA, 0));
}

std::vector<double> to_host(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kCPU).to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// A broadcast operand as a CPU tensor whose stride-0 dims have size 1.
template <typename T>
at::Tensor broadcast_operand(const T* data, const AttnParams& p, const BroadcastStrides& st,
                             at::ScalarType type) {
  const int64_t sizes[4] = {st.b ? p.batch : 1, st.h ? p.heads : 1, st.q ? p.seqlen_q : 1,
                            st.k ? p.seqlen_k : 1};
  const int64_t strides[4] = {st.b, st.h, st.q, st.k};
  return at::from_blob(const_cast<T*>(data), sizes, strides, at::TensorOptions().dtype(type));
}

// Whether the backend's own is_causal flag expresses params' causality: Sq == Sk, where both
// alignments coincide. Otherwise causality goes into the additive bias (efficient only).
bool causal_by_flag(const AttnParams& p) {
  return p.causal && p.seqlen_q == p.seqlen_k;
}

// Additive float bias [B, H, Sq, Sk] in `type` on the GPU: where(visible, bias, fill), with
// causality folded in unless causal_by_flag; undefined when nothing is masked or biased. Its
// rows are padded to a multiple of 16 keys (the efficient kernel's alignment rule).
at::Tensor additive_bias(const AttnParams& p, at::ScalarType type) {
  const bool fold_causal = p.causal && !causal_by_flag(p);
  if (p.mask == nullptr && p.bias == nullptr && !fold_causal) return {};
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor bias = p.bias != nullptr ? broadcast_operand(p.bias, p, p.bias_strides, at::kDouble)
                                      : at::zeros({1, 1, 1, 1}, f64);
  at::Tensor keep;
  if (p.mask != nullptr) keep = broadcast_operand(p.mask, p, p.mask_strides, at::kByte).ne(0);
  if (fold_causal) {
    const int64_t shift = causal_shift(p);
    const auto idx = at::TensorOptions().dtype(at::kLong);
    const at::Tensor i = at::arange(p.seqlen_q, idx).view({1, 1, p.seqlen_q, 1});
    const at::Tensor j = at::arange(p.seqlen_k, idx).view({1, 1, 1, p.seqlen_k});
    const at::Tensor c = j.le(i + shift);
    keep = keep.defined() ? at::logical_and(keep, c) : c;
  }
  if (keep.defined()) bias = at::where(keep, bias, mask_fill_value(p.mask_fill, p.precision));
  const int64_t padded = (p.seqlen_k + 15) / 16 * 16;
  at::Tensor out = at::zeros({p.batch, p.heads, p.seqlen_q, padded}, f64);
  out.narrow(3, 0, p.seqlen_k).copy_(bias.expand({p.batch, p.heads, p.seqlen_q, p.seqlen_k}));
  return out.to(type).to(at::Device(at::kCUDA, 0)).narrow(3, 0, p.seqlen_k);
}

class TorchCudaRun final : public VariantRun {
 public:
  TorchCudaRun(std::string backend, const AttnParams& params, const RunConfig& config,
               const VariantInputs& in)
      : backend_(std::move(backend)), p_(params) {
    p_.precision = config.precision;
    const at::ScalarType type = dtype_of(config.precision);
    const int64_t B = p_.batch, H = p_.heads, Hk = p_.kv_heads, Sq = p_.seqlen_q, Sk = p_.seqlen_k;
    q_ = to_cuda(in.q, {B, H, Sq, p_.head_dim}, type);
    k_ = to_cuda(in.k, {B, Hk, Sk, p_.head_dim}, type);
    v_ = to_cuda(in.v, {B, Hk, Sk, p_.head_dim_v}, type);
    if (p_.group_size() > 1) {
      k_ = k_.repeat_interleave(p_.group_size(), 1).contiguous();
      v_ = v_.repeat_interleave(p_.group_size(), 1).contiguous();
    }
    dout_ = in.dout != nullptr ? to_cuda(in.dout, {B, H, Sq, p_.head_dim_v}, type)
                               : at::ones({B, H, Sq, p_.head_dim_v}, q_.options());
    bias_ = additive_bias(p_, type);
    cuda::device_synchronize();
  }

  void forward() override {
    c10::NoGradGuard no_grad;
    const bool causal = causal_by_flag(p_);
    const std::optional<at::Tensor> bias =
        bias_.defined() ? std::optional<at::Tensor>(bias_) : std::nullopt;
    if (backend_ == "flash") {
      auto r = at::_scaled_dot_product_flash_attention(q_, k_, v_, 0.0, causal, false, p_.scale);
      o_ = std::get<0>(r);
      lse_ = std::get<1>(r);
      cum_q_ = std::get<2>(r);
      cum_k_ = std::get<3>(r);
      max_q_ = std::get<4>(r).expect_int();
      max_k_ = std::get<5>(r).expect_int();
      seed_ = std::get<6>(r);
      offset_ = std::get<7>(r);
    } else if (backend_ == "efficient") {
      auto r = at::_scaled_dot_product_efficient_attention(q_, k_, v_, bias, true, 0.0, causal,
                                                           p_.scale);
      std::tie(o_, lse_, seed_, offset_) = r;
    } else {
      auto r = at::_scaled_dot_product_cudnn_attention(q_, k_, v_, bias, true, 0.0, causal, false,
                                                       p_.scale);
      o_ = std::get<0>(r);
      lse_ = std::get<1>(r);
      cum_q_ = std::get<2>(r);
      cum_k_ = std::get<3>(r);
      max_q_ = std::get<4>(r).expect_int();
      max_k_ = std::get<5>(r).expect_int();
      seed_ = std::get<6>(r);
      offset_ = std::get<7>(r);
    }
    cuda::device_synchronize();
  }

  void backward() override {
    c10::NoGradGuard no_grad;
    const bool causal = causal_by_flag(p_);
    if (backend_ == "flash") {
      std::tie(dq_, dk_, dv_) = at::_scaled_dot_product_flash_attention_backward(
          dout_, q_, k_, v_, o_, lse_, cum_q_, cum_k_, max_q_, max_k_, 0.0, causal, seed_, offset_,
          p_.scale);
    } else if (backend_ == "efficient") {
      at::Tensor dbias;
      std::tie(dq_, dk_, dv_, dbias) = at::_scaled_dot_product_efficient_attention_backward(
          dout_, q_, k_, v_, bias_, o_, lse_, seed_, offset_, 0.0, {true, true, true, false},
          causal, p_.scale);
    } else {
      std::tie(dq_, dk_, dv_) = at::_scaled_dot_product_cudnn_attention_backward(
          dout_, q_, k_, v_, o_, lse_, seed_, offset_, bias_, cum_q_, cum_k_, max_q_, max_k_, 0.0,
          causal, p_.scale);
    }
    cuda::device_synchronize();
  }

  // lse: flash [B, H, Sq]; efficient pads the last dim to a multiple of 32; cuDNN may add a
  // trailing 1. dK, dV of the repeated heads are summed per kv group.
  VariantOutputs outputs() const override {
    const int64_t B = p_.batch, H = p_.heads, Hk = p_.kv_heads, Sq = p_.seqlen_q, Sk = p_.seqlen_k;
    VariantOutputs out;
    out.o = to_host(o_);
    out.lse = to_host(lse_.reshape({B, H, -1}).narrow(2, 0, Sq));
    if (dq_.defined()) {
      const auto group_sum = [&](const at::Tensor& g, int64_t dim) {
        return g.to(at::kFloat)
            .reshape({B, Hk, p_.group_size(), Sk, dim})
            .sum(2)
            .to(g.scalar_type());
      };
      out.dq = to_host(dq_);
      out.dk = to_host(group_sum(dk_, p_.head_dim));
      out.dv = to_host(group_sum(dv_, p_.head_dim_v));
    }
    return out;
  }

 private:
  std::string backend_;
  AttnParams p_;
  at::Tensor q_, k_, v_, dout_, bias_;
  at::Tensor o_, lse_, cum_q_, cum_k_, seed_, offset_, dq_, dk_, dv_;
  int64_t max_q_ = 0, max_k_ = 0;
};

}  // namespace

std::string load_torch_cuda() {
  static std::once_flag once;
  static std::string error;
  std::call_once(once, [] {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&at::globalContext), &info) == 0 ||
        info.dli_fname == nullptr) {
      error = "cannot locate LibTorch (dladdr failed)";
      return;
    }
    std::string path = info.dli_fname;
    path = path.substr(0, path.find_last_of('/') + 1) + "libtorch_cuda.so";
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      error = std::string("cannot load ") + path + ": " + dlerror();
    } else if (!at::globalContext().hasCUDA()) {
      error = "LibTorch was loaded with CUDA support but sees no CUDA device";
    }
  });
  return error;
}

std::string torch_cuda_unsupported(const std::string& backend, const AttnParams& p) {
  const std::string name = "torch-cuda-" + backend;
  if (p.softcap > 0) return name + " has no tanh softcap";
  if (p.head_dim != p.head_dim_v) return name + " needs head_dim == head_dim_v";
  if (p.head_dim % 8 != 0)
    return name + " needs head_dim a multiple of 8 (got " + std::to_string(p.head_dim) + ")";
  const int64_t max_dim = backend == "cudnn" ? 128 : 256;
  if (p.head_dim > max_dim) return name + " runs head_dim <= " + std::to_string(max_dim);
  const bool masked = p.mask != nullptr || p.bias != nullptr;
  if (backend != "efficient") {
    if (masked) return name + " takes no bool mask or bias (use torch-cuda-efficient)";
    if (p.causal && p.seqlen_q != p.seqlen_k) {
      return name +
             ": causal with seqlen_q != seqlen_k is left to torch-cuda-efficient (alignment)";
    }
  }
  return "";
}

std::unique_ptr<VariantRun> make_torch_cuda_run(const std::string& backend,
                                                const AttnParams& params, const RunConfig& config,
                                                const VariantInputs& inputs) {
  return std::make_unique<TorchCudaRun>(backend, params, config, inputs);
}

}  // namespace attnscope
