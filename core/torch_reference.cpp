// LibTorch fp64 autograd "math attention": the same score pipeline as the naive reference
// kernel written with at:: ops, differentiated by autograd.
#include "core/torch_reference.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstdint>
#include <limits>
#include <vector>

namespace attnscope {
namespace {

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
    const int64_t shift = p.causal_align == CausalAlign::bottom_right ? p.seqlen_k - p.seqlen_q : 0;
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
  constexpr double kInf = std::numeric_limits<double>::infinity();
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

  // p = softmax(s). Under MaskFill::safe a row whose scores are all -inf gives p = 0 and no
  // gradient (PyTorch's _safe_softmax): the row is zeroed before the softmax too, so its
  // backward never sees the NaN of exp(-inf - -inf).
  at::Tensor p;
  at::Tensor empty_row;  // [B,H,Sq,1] bool, only under safe
  if (params.mask_fill == MaskFill::safe) {
    empty_row = s.detach().eq(-kInf).all(-1, /*keepdim=*/true);
    p = at::where(empty_row, 0.0, at::softmax(at::where(empty_row, 0.0, s), -1));
  } else {
    p = at::softmax(s, -1);
  }
  const at::Tensor o = at::matmul(p, v_rep);  // [B,H,Sq,Dv]

  // lse [B,H,Sq] = m + log(sum exp(s - m)): NaN for an all -inf row, -inf for it under safe.
  const at::Tensor sd = s.detach();
  const at::Tensor m = sd.amax(-1, /*keepdim=*/true);
  at::Tensor lse = m + at::log(at::exp(sd - m).sum(-1, /*keepdim=*/true));
  if (empty_row.defined()) lse = at::where(empty_row, -kInf, lse);

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

}  // namespace attnscope
