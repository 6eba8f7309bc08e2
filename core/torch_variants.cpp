// Registry runs on LibTorch at the precision's dtype: eager math attention op by op with
// autograd (what unfused PyTorch code really does), SDPA's MATH backend with autograd and
// PyTorch's CPU flash SDPA kernel with its backward.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "core/variant_runs.h"

namespace attnscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

at::ScalarType dtype_of(Precision p) {
  switch (p) {
    case Precision::f64:
      return at::kDouble;
    case Precision::f16:
      return at::kHalf;
    case Precision::bf16:
      return at::kBFloat16;
    case Precision::f32:
      break;
  }
  return at::kFloat;
}

// fp64 data of the given shape converted (rounded to nearest even) to `type`.
at::Tensor tensor_in(const double* data, at::IntArrayRef shape, at::ScalarType type) {
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  return at::from_blob(const_cast<double*>(data), shape, f64).to(type, false, /*copy=*/true);
}

std::vector<double> tensor_out(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// A broadcast operand as a tensor whose dims of stride 0 have size 1, so that combining it
// never materialises [B, H, Sq, Sk] for a mask like [B, 1, 1, Sk].
template <typename T>
at::Tensor broadcast_operand(const T* data, const AttnParams& p, const BroadcastStrides& st,
                             at::ScalarType type) {
  const int64_t sizes[4] = {st.b ? p.batch : 1, st.h ? p.heads : 1, st.q ? p.seqlen_q : 1,
                            st.k ? p.seqlen_k : 1};
  const int64_t strides[4] = {st.b, st.h, st.q, st.k};
  return at::from_blob(const_cast<T*>(data), sizes, strides, at::TensorOptions().dtype(type));
}

// keep [.., .., Sq|1, Sk|1] bool: true where the bool mask (and causality, if asked) lets key j
// be seen by query i; undefined when nothing is hidden.
at::Tensor visible_keys(const AttnParams& p, bool with_causal) {
  at::Tensor keep;
  if (with_causal && p.causal) {
    const int64_t shift = causal_shift(p);
    const auto index = at::TensorOptions().dtype(at::kLong);
    const at::Tensor i = at::arange(p.seqlen_q, index).view({1, 1, p.seqlen_q, 1});
    const at::Tensor j = at::arange(p.seqlen_k, index).view({1, 1, 1, p.seqlen_k});
    keep = j.le(i + shift);
  }
  if (p.mask != nullptr) {
    const at::Tensor m = broadcast_operand(p.mask, p, p.mask_strides, at::kByte).ne(0);
    keep = keep.defined() ? at::logical_and(keep, m) : m;
  }
  return keep;
}

std::optional<at::Tensor> optional_tensor(const at::Tensor& t) {
  return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
}

// Drops LibTorch warnings while it lives (this thread's handler): SDPA MATH warns once that a
// dropout_mask "should only be used for testing purposes", which replaying one is.
class QuietWarnings final : public c10::WarningHandler {
 public:
  QuietWarnings() : guard_(this) {}
  void process(const c10::Warning&) override {}

 private:
  c10::WarningUtils::WarningHandlerGuard guard_;
};

void use_threads(int threads) {
  if (threads > 0 && at::get_num_threads() != threads) at::set_num_threads(threads);
}

// Eager math attention in dtype T, every op's output stored in T:
//   s = where(keep, (q k^T) * scale [softcapped] + bias, fill in T); p = softmax(s);
//   p = p * (keep / (1 - dropout_p)) with a dropout keep-mask (torch.dropout's noise); o = p v;
// backward of sum(o * dO) by autograd; GQA through repeat_interleave (autograd sums the group).
// Under MaskFill::safe the softmax is at::_safe_softmax: an all -inf row gives p = 0.
class TorchEagerRun final : public VariantRun {
 public:
  TorchEagerRun(const AttnParams& params, const RunConfig& config, const VariantInputs& in)
      : p_(params), type_(dtype_of(config.precision)) {
    p_.precision = config.precision;
    use_threads(config.threads);
    const int64_t B = p_.batch, H = p_.heads, Hk = p_.kv_heads, Sq = p_.seqlen_q, Sk = p_.seqlen_k;
    q_ = tensor_in(in.q, {B, H, Sq, p_.head_dim}, type_);
    k_ = tensor_in(in.k, {B, Hk, Sk, p_.head_dim}, type_);
    v_ = tensor_in(in.v, {B, Hk, Sk, p_.head_dim_v}, type_);
    dout_ = in.dout != nullptr ? tensor_in(in.dout, {B, H, Sq, p_.head_dim_v}, type_)
                               : at::ones({B, H, Sq, p_.head_dim_v}, q_.options());
    keep_ = visible_keys(p_, true);
    if (p_.bias != nullptr) {
      bias_ = broadcast_operand(p_.bias, p_, p_.bias_strides, at::kDouble).to(type_);
    }
    fill_ = at::scalar_tensor(mask_fill_value(p_.mask_fill, p_.precision)).to(type_);
    if (p_.dropout_keep != nullptr) {
      noise_ = broadcast_operand(p_.dropout_keep, p_, p_.dropout_strides, at::kByte)
                   .to(type_)
                   .div(1.0 - p_.dropout_p);
    }
  }

  void forward() override {
    c10::AutoGradMode grad_mode(true);
    q_ = q_.detach().requires_grad_(true);
    k_ = k_.detach().requires_grad_(true);
    v_ = v_.detach().requires_grad_(true);
    const at::Tensor k_rep = p_.group_size() > 1 ? k_.repeat_interleave(p_.group_size(), 1) : k_;
    const at::Tensor v_rep = p_.group_size() > 1 ? v_.repeat_interleave(p_.group_size(), 1) : v_;
    at::Tensor s = at::matmul(q_, k_rep.transpose(-2, -1)) * p_.scale;
    if (p_.softcap > 0) s = at::tanh(s / p_.softcap) * p_.softcap;
    if (bias_.defined()) s = s + bias_;
    if (keep_.defined()) s = at::where(keep_, s, fill_);
    at::Tensor prob =
        p_.mask_fill == MaskFill::safe ? at::_safe_softmax(s, -1) : at::softmax(s, -1);
    if (noise_.defined()) prob = prob * noise_;
    o_ = at::matmul(prob, v_rep);
    s_ = s.detach();
  }

  void backward() override { o_.backward(dout_); }

  // lse = m + log(sum exp(s - m)) of the stored scores, in fp32 (fp64 at f64), stored in T;
  // -inf for an all -inf row under `safe` (NaN otherwise, as eager softmax).
  VariantOutputs outputs() const override {
    const at::Tensor s = s_.to(type_ == at::kDouble ? at::kDouble : at::kFloat);
    const at::Tensor m = s.amax(-1, /*keepdim=*/true);
    at::Tensor lse = m + at::log(at::exp(s - m).sum(-1, /*keepdim=*/true));
    if (p_.mask_fill == MaskFill::safe) {
      lse = at::where(s.eq(-kInf).all(-1, /*keepdim=*/true), -kInf, lse);
    }
    VariantOutputs out;
    out.o = tensor_out(o_);
    out.lse = tensor_out(lse.squeeze(-1).to(type_));
    out.dq = q_.grad().defined() ? tensor_out(q_.grad()) : std::vector<double>{};
    out.dk = k_.grad().defined() ? tensor_out(k_.grad()) : std::vector<double>{};
    out.dv = v_.grad().defined() ? tensor_out(v_.grad()) : std::vector<double>{};
    return out;
  }

 private:
  AttnParams p_;
  at::ScalarType type_;
  at::Tensor q_, k_, v_, dout_, keep_, bias_, fill_, noise_;
  at::Tensor o_, s_;
};

// at::_scaled_dot_product_attention_math on tensors of the precision's dtype. On CPU it
// upcasts fp16 / bf16 to fp32, scales q and k by sqrt(scale) each, adds the float mask, takes
// _safe_softmax (an all -inf row gives P = 0), multiplies by V and casts O back once; autograd
// goes back through the casts, so dQ, dK, dV are rounded once too. The op adds a bool mask as
// 0 / 1 (SDPA's public entry converts it first), so the bool mask, causality (either alignment)
// and bias reach it as one additive mask where(keep, bias, fill) in the compute dtype: a finite
// fill is added to the scores like a float mask, not substituted. GQA by enable_gqa; dropout
// by dropout_mask (dropped P zeroed, V scaled by 1 / (1 - p)).
class TorchSdpaMathRun final : public VariantRun {
 public:
  TorchSdpaMathRun(const AttnParams& params, const RunConfig& config, const VariantInputs& in)
      : p_(params) {
    p_.precision = config.precision;
    use_threads(config.threads);
    const at::ScalarType type = dtype_of(config.precision);
    compute_ = type == at::kDouble ? at::kDouble : at::kFloat;
    const int64_t B = p_.batch, H = p_.heads, Hk = p_.kv_heads, Sq = p_.seqlen_q, Sk = p_.seqlen_k;
    q_ = tensor_in(in.q, {B, H, Sq, p_.head_dim}, type);
    k_ = tensor_in(in.k, {B, Hk, Sk, p_.head_dim}, type);
    v_ = tensor_in(in.v, {B, Hk, Sk, p_.head_dim_v}, type);
    dout_ = in.dout != nullptr ? tensor_in(in.dout, {B, H, Sq, p_.head_dim_v}, type)
                               : at::ones({B, H, Sq, p_.head_dim_v}, q_.options());
    const at::Tensor keep = visible_keys(p_, true);
    if (keep.defined() || p_.bias != nullptr) {
      const at::Tensor bias = p_.bias != nullptr
                                  ? broadcast_operand(p_.bias, p_, p_.bias_strides, at::kDouble)
                                  : at::zeros({}, at::TensorOptions().dtype(at::kDouble));
      const at::Tensor m = keep.defined()
                               ? at::where(keep, bias, mask_fill_value(p_.mask_fill, p_.precision))
                               : bias;
      mask_ = m.to(compute_).contiguous();
    }
    if (p_.dropout_keep != nullptr) {
      dropout_keep_ = broadcast_operand(p_.dropout_keep, p_, p_.dropout_strides, at::kByte).ne(0);
    }
  }

  void forward() override {
    c10::AutoGradMode grad_mode(true);
    q_ = q_.detach().requires_grad_(true);
    k_ = k_.detach().requires_grad_(true);
    v_ = v_.detach().requires_grad_(true);
    const double dropout_p = dropout_keep_.defined() ? p_.dropout_p : 0.0;
    QuietWarnings quiet;
    o_ = std::get<0>(at::_scaled_dot_product_attention_math(
        q_, k_, v_, optional_tensor(mask_), dropout_p, /*is_causal=*/false,
        optional_tensor(dropout_keep_), p_.scale, /*enable_gqa=*/p_.group_size() > 1));
  }

  void backward() override { o_.backward(dout_); }

  // lse: MATH stores none; derived from the op's scores in the compute dtype (-inf for an all
  // -inf row, as the safe softmax treats it).
  VariantOutputs outputs() const override {
    c10::NoGradGuard no_grad;
    const double root = std::sqrt(p_.scale);
    const at::Tensor k = p_.group_size() > 1 ? k_.repeat_interleave(p_.group_size(), 1) : k_;
    at::Tensor s = at::matmul(q_.detach().to(compute_) * root,
                              (k.detach().to(compute_) * root).transpose(-2, -1));
    if (mask_.defined()) s = s + mask_;
    VariantOutputs out;
    out.o = tensor_out(o_);
    out.lse = tensor_out(at::logsumexp(s, -1));
    out.dq = q_.grad().defined() ? tensor_out(q_.grad()) : std::vector<double>{};
    out.dk = k_.grad().defined() ? tensor_out(k_.grad()) : std::vector<double>{};
    out.dv = v_.grad().defined() ? tensor_out(v_.grad()) : std::vector<double>{};
    return out;
  }

 private:
  AttnParams p_;
  at::ScalarType compute_ = at::kFloat;
  at::Tensor q_, k_, v_, dout_, mask_, dropout_keep_;
  at::Tensor o_;
};

// PyTorch's CPU flash kernel. The bool mask and bias reach it as one additive float mask
// where(keep, bias, fill); causality as its is_causal flag (top-left only). A fully masked row
// gives O = 0, LSE = 0 and zero gradients, like real FlashAttention, whatever the fill policy.
// Its backward recomputes P = exp(S - LSE) (BackwardP::from_lse) whatever params say.
class TorchFlashCpuRun final : public VariantRun {
 public:
  TorchFlashCpuRun(const AttnParams& params, const RunConfig& config, const VariantInputs& in)
      : p_(params) {
    p_.precision = config.precision;
    use_threads(config.threads);
    const at::ScalarType type = dtype_of(config.precision);
    const int64_t B = p_.batch, H = p_.heads, Hk = p_.kv_heads, Sq = p_.seqlen_q, Sk = p_.seqlen_k;
    q_ = tensor_in(in.q, {B, H, Sq, p_.head_dim}, type);
    k_ = tensor_in(in.k, {B, Hk, Sk, p_.head_dim}, type);
    v_ = tensor_in(in.v, {B, Hk, Sk, p_.head_dim_v}, type);
    dout_ = in.dout != nullptr ? tensor_in(in.dout, {B, H, Sq, p_.head_dim_v}, type)
                               : at::ones({B, H, Sq, p_.head_dim_v}, q_.options());
    const at::Tensor keep = visible_keys(p_, false);
    if (keep.defined() || p_.bias != nullptr) {
      const at::Tensor bias = p_.bias != nullptr
                                  ? broadcast_operand(p_.bias, p_, p_.bias_strides, at::kDouble)
                                  : at::zeros({}, at::TensorOptions().dtype(at::kDouble));
      const at::Tensor m = keep.defined()
                               ? at::where(keep, bias, mask_fill_value(p_.mask_fill, p_.precision))
                               : bias;
      mask_ = m.to(type == at::kDouble ? at::kDouble : at::kFloat).contiguous();
    }
  }

  void forward() override {
    c10::NoGradGuard no_grad;
    std::tie(o_, lse_) = at::_scaled_dot_product_flash_attention_for_cpu(
        q_, k_, v_, 0.0, p_.causal, optional_tensor(mask_), p_.scale);
  }

  void backward() override {
    c10::NoGradGuard no_grad;
    std::tie(dq_, dk_, dv_) = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        dout_, q_, k_, v_, o_, lse_, 0.0, p_.causal, optional_tensor(mask_), p_.scale);
  }

  VariantOutputs outputs() const override {
    VariantOutputs out;
    out.o = tensor_out(o_);
    out.lse = tensor_out(lse_);
    if (dq_.defined()) {
      out.dq = tensor_out(dq_);
      out.dk = tensor_out(dk_);
      out.dv = tensor_out(dv_);
    }
    return out;
  }

 private:
  AttnParams p_;
  at::Tensor q_, k_, v_, dout_, mask_;
  at::Tensor o_, lse_, dq_, dk_, dv_;
};

}  // namespace

std::unique_ptr<VariantRun> make_torch_eager_run(const AttnParams& params, const RunConfig& config,
                                                 const VariantInputs& inputs) {
  return std::make_unique<TorchEagerRun>(params, config, inputs);
}

std::unique_ptr<VariantRun> make_torch_sdpa_math_run(const AttnParams& params,
                                                     const RunConfig& config,
                                                     const VariantInputs& inputs) {
  return std::make_unique<TorchSdpaMathRun>(params, config, inputs);
}

std::unique_ptr<VariantRun> make_torch_flash_cpu_run(const AttnParams& params,
                                                     const RunConfig& config,
                                                     const VariantInputs& inputs) {
  return std::make_unique<TorchFlashCpuRun>(params, config, inputs);
}

}  // namespace attnscope
