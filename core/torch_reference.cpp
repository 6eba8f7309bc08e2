// LibTorch oracles: fp64 autograd "math attention" (the same score pipeline as the naive
// reference kernel written with at:: ops, differentiated by autograd) and PyTorch's public SDPA
// entry restricted to its MATH backend.
#include "core/torch_reference.h"

#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <c10/core/GradMode.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

namespace attnscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

at::TensorOptions f64() {
  return at::TensorOptions().dtype(at::kDouble);
}

// An owned, contiguous fp64 copy of `data` with the given shape.
at::Tensor copy_in(const double* data, at::IntArrayRef shape) {
  return at::from_blob(const_cast<double*>(data), shape, f64()).clone();
}

std::vector<double> copy_out(const at::Tensor& t) {
  const at::Tensor c = t.detach().contiguous();
  const double* data = c.data_ptr<double>();
  return std::vector<double>(data, data + c.numel());
}

// View of a broadcast operand as [B, H, Sq, Sk] through its element strides (0 = broadcast).
template <typename T>
at::Tensor broadcast_view(const T* data, const AttnParams& p, const BroadcastStrides& st,
                          at::ScalarType type) {
  return at::from_blob(const_cast<T*>(data), {p.batch, p.heads, p.seqlen_q, p.seqlen_k},
                       {st.b, st.h, st.q, st.k}, at::TensorOptions().dtype(type));
}

// keep [B or 1, H or 1, Sq, Sk] bool: true where key j is visible to query i (bool mask and
// causality), broadcastable to the scores.
at::Tensor visible_keys(const AttnParams& p) {
  at::Tensor keep = at::ones({1, 1, p.seqlen_q, p.seqlen_k}, at::TensorOptions().dtype(at::kBool));
  if (p.causal) {
    // Visible iff j <= i + shift (shift = Sk - Sq for bottom-right alignment, else 0).
    const int64_t shift = causal_shift(p);
    const auto index = at::TensorOptions().dtype(at::kLong);
    const at::Tensor i = at::arange(p.seqlen_q, index).view({p.seqlen_q, 1});
    const at::Tensor j = at::arange(p.seqlen_k, index).view({1, p.seqlen_k});
    keep = at::logical_and(keep, j.le(i + shift));
  }
  if (p.mask != nullptr) {
    keep = at::logical_and(keep, broadcast_view(p.mask, p, p.mask_strides, at::kByte).ne(0));
  }
  return keep;
}

}  // namespace

TorchReference torch_reference_attention(const AttnParams& params, const double* q, const double* k,
                                         const double* v, const double* dout) {
  const int64_t B = params.batch, H = params.heads, Hk = params.kv_heads;
  const int64_t Sq = params.seqlen_q, Sk = params.seqlen_k;
  const int64_t D = params.head_dim, Dv = params.head_dim_v;
  c10::AutoGradMode grad_mode(true);

  // Leaves: q [B,H,Sq,D], k [B,Hk,Sk,D], v [B,Hk,Sk,Dv]. GQA repeats each kv head over its
  // group of H / Hk query heads, so autograd sums dk / dv over the group.
  at::Tensor tq = copy_in(q, {B, H, Sq, D}).set_requires_grad(true);
  at::Tensor tk = copy_in(k, {B, Hk, Sk, D}).set_requires_grad(true);
  at::Tensor tv = copy_in(v, {B, Hk, Sk, Dv}).set_requires_grad(true);
  const at::Tensor k_rep = tk.repeat_interleave(params.group_size(), 1);
  const at::Tensor v_rep = tv.repeat_interleave(params.group_size(), 1);

  // s_pre [B,H,Sq,Sk] = scale * q k^T, soft-capped as cap * tanh(s / cap).
  at::Tensor s_pre = at::matmul(tq, k_rep.transpose(-2, -1)) * params.scale;
  if (params.softcap > 0) s_pre = at::tanh(s_pre / params.softcap) * params.softcap;

  // s = s_pre + bias where visible, the fill value where masked (the fill replaces the score,
  // so a NaN q.k of a masked key does not reach s). Written as
  //   where(keep or isfinite(s_pre), s_pre, 0) * keep + where(keep, bias, fill)
  // so that the gradient reaching a masked entry is ds * 0: zero, but NaN stays NaN, as through
  // PyTorch's additive -inf mask and as in the reference kernel.
  const at::Tensor keep = visible_keys(params);
  const double fill = mask_fill_value(params.mask_fill, params.precision);
  const at::Tensor bias =
      params.bias != nullptr ? broadcast_view(params.bias, params, params.bias_strides, at::kDouble)
                             : at::zeros({}, f64());
  const at::Tensor finite_or_kept = at::logical_or(keep, at::isfinite(s_pre.detach()));
  const at::Tensor s =
      at::where(finite_or_kept, s_pre, 0.0) * keep.to(at::kDouble) + at::where(keep, bias, fill);

  // p = softmax(s); under MaskFill::safe PyTorch's own at::_safe_softmax, which gives p = 0
  // for a row whose scores are all -inf (its backward, p (dp - rowsum(dp p)), is then 0 too,
  // unless dp holds a NaN). Dropout: o = (p * z) v with z = keep / (1 - dropout_p).
  const at::Tensor p =
      params.mask_fill == MaskFill::safe ? at::_safe_softmax(s, -1) : at::softmax(s, -1);
  at::Tensor pz = p;
  if (params.dropout_keep != nullptr) {
    const at::Tensor keep_mask =
        broadcast_view(params.dropout_keep, params, params.dropout_strides, at::kByte);
    pz = p * (keep_mask.to(at::kDouble) / (1.0 - params.dropout_p));
  }
  const at::Tensor o = at::matmul(pz, v_rep);  // [B,H,Sq,Dv]

  // lse [B,H,Sq] = m + log(sum exp(s - m)): NaN for an all -inf row, -inf for it under safe.
  const at::Tensor sd = s.detach();
  const at::Tensor m = sd.amax(-1, /*keepdim=*/true);
  at::Tensor lse = m + at::log(at::exp(sd - m).sum(-1, /*keepdim=*/true));
  if (params.mask_fill == MaskFill::safe) {
    lse = at::where(sd.eq(-kInf).all(-1, /*keepdim=*/true), -kInf, lse);
  }

  // Backward of sum(o * dO).
  const at::Tensor grad_o = dout != nullptr ? copy_in(dout, {B, H, Sq, Dv}) : at::ones_like(o);
  o.backward(grad_o);

  TorchReference r;
  r.o = copy_out(o);
  r.lse = copy_out(lse.squeeze(-1));
  r.dq = copy_out(tq.grad());
  r.dk = copy_out(tk.grad());
  r.dv = copy_out(tv.grad());
  return r;
}

namespace {

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

// Only SDPA's MATH backend enabled while it lives, the previous switches restored after, as
// torch.nn.attention.sdpa_kernel(SDPBackend.MATH) does. The switches are process-wide.
class MathSdpaOnly {
 public:
  MathSdpaOnly()
      : ctx_(at::globalContext()),
        flash_(ctx_.userEnabledFlashSDP()),
        efficient_(ctx_.userEnabledMemEfficientSDP()),
        math_(ctx_.userEnabledMathSDP()),
        cudnn_(ctx_.userEnabledCuDNNSDP()),
        overrideable_(ctx_.userEnabledOverrideableSDP()) {
    set(false, false, true, false, false);
  }
  ~MathSdpaOnly() { set(flash_, efficient_, math_, cudnn_, overrideable_); }
  MathSdpaOnly(const MathSdpaOnly&) = delete;
  MathSdpaOnly& operator=(const MathSdpaOnly&) = delete;

 private:
  void set(bool flash, bool efficient, bool math, bool cudnn, bool overrideable) {
    ctx_.setSDPUseFlash(flash);
    ctx_.setSDPUseMemEfficient(efficient);
    ctx_.setSDPUseMath(math);
    ctx_.setSDPUseCuDNN(cudnn);
    ctx_.setSDPUseOverrideable(overrideable);
  }

  at::Context& ctx_;
  bool flash_, efficient_, math_, cudnn_, overrideable_;
};

}  // namespace

TorchReference torch_sdpa_math_public(const AttnParams& params, Precision precision,
                                      const double* q, const double* k, const double* v,
                                      const double* dout) {
  if (params.softcap > 0) throw std::invalid_argument("SDPA has no tanh softcap");
  if (params.dropout_keep != nullptr || params.dropout_p > 0) {
    throw std::invalid_argument("public SDPA draws its own dropout mask");
  }
  const int64_t B = params.batch, H = params.heads, Hk = params.kv_heads;
  const int64_t Sq = params.seqlen_q, Sk = params.seqlen_k;
  const int64_t D = params.head_dim, Dv = params.head_dim_v;
  const at::ScalarType type = dtype_of(precision);
  const at::ScalarType compute = type == at::kDouble ? at::kDouble : at::kFloat;
  c10::AutoGradMode grad_mode(true);
  at::Tensor tq = copy_in(q, {B, H, Sq, D}).to(type).set_requires_grad(true);
  at::Tensor tk = copy_in(k, {B, Hk, Sk, D}).to(type).set_requires_grad(true);
  at::Tensor tv = copy_in(v, {B, Hk, Sk, Dv}).to(type).set_requires_grad(true);

  // SDPA's own is_causal (top-left) where nothing else masks; otherwise causality joins the
  // bool mask, which SDPA converts itself (-inf where false) unless a bias or a finite fill
  // makes it a float mask where(keep, bias, fill).
  AttnParams masks = params;
  const bool by_flag = params.causal && params.mask == nullptr && params.bias == nullptr &&
                       (params.causal_align == CausalAlign::top_left || Sq == Sk);
  masks.causal = params.causal && !by_flag;
  std::optional<at::Tensor> attn_mask;
  if (masks.causal || params.mask != nullptr || params.bias != nullptr) {
    const at::Tensor keep = visible_keys(masks);
    const double fill = mask_fill_value(params.mask_fill, precision);
    if (params.bias == nullptr && fill == -kInf) {
      attn_mask = keep;
    } else {
      const at::Tensor bias =
          params.bias != nullptr
              ? broadcast_view(params.bias, params, params.bias_strides, at::kDouble)
              : at::zeros({}, f64());
      attn_mask = at::where(keep, bias, fill).to(compute);
    }
  }
  at::Tensor o;
  {
    MathSdpaOnly math_only;
    o = at::scaled_dot_product_attention(tq, tk, tv, attn_mask, 0.0, by_flag, params.scale,
                                         /*enable_gqa=*/Hk < H);
  }
  const at::Tensor grad_o =
      dout != nullptr ? copy_in(dout, {B, H, Sq, Dv}).to(type) : at::ones_like(o);
  o.backward(grad_o);

  TorchReference r;
  r.o = copy_out(o.to(at::kDouble));
  r.dq = copy_out(tq.grad().to(at::kDouble));
  r.dk = copy_out(tk.grad().to(at::kDouble));
  r.dv = copy_out(tv.grad().to(at::kDouble));
  return r;
}

std::string pin_torch_cpu_isa() {
  setenv("ATEN_CPU_CAPABILITY", "default", 1);
  at::globalContext().setUserEnabledMkldnn(false);
  return at::get_cpu_capability();
}

}  // namespace attnscope
