// LibTorch oracles over AttnParams: fp64 autograd "math attention", the independent second
// oracle that the naive reference kernel (kernels/reference) must agree with to ~1e-12, and
// PyTorch's public SDPA entry under its MATH backend, the oracle of the torch-sdpa-math variant.
#pragma once

#include <string>
#include <vector>

#include "kernels/attn_params.h"

namespace attnscope {

// Outputs of the LibTorch computation, same shapes as ReferenceTrace:
//   o [B, H, Sq, Dv]   lse [B, H, Sq]   dq [B, H, Sq, D]   dk [B, Hk, Sk, D]   dv [B, Hk, Sk, Dv]
struct TorchReference {
  std::vector<double> o, lse, dq, dk, dv;
};

// Forward with at:: ops (matmul, tanh softcap, mask / causal / bias, softmax, dropout keep-mask)
// and the backward of sum(O * dO) by autograd (P saved, BackwardP is not read); dout ==
// nullptr means dO = 1. Layouts as in AttnParams; mask, bias and keep-mask are read through
// their broadcast strides. Fill policies follow DESIGN §3 like the reference kernel
// (MaskFill::safe runs at::_safe_softmax). Throws c10::Error (a std::exception) if LibTorch
// rejects the shapes.
TorchReference torch_reference_attention(const AttnParams& params, const double* q, const double* k,
                                         const double* v, const double* dout);

// at::scaled_dot_product_attention with only the MATH backend enabled (as under
// torch.nn.attention.sdpa_kernel(SDPBackend.MATH); not thread-safe, the switch is
// process-wide) on inputs in `precision`'s dtype, backward by autograd; outputs converted to
// fp64, lse left empty (SDPA returns none). The bool mask goes in as bool (SDPA converts it),
// causality as is_causal where nothing else masks, GQA by enable_gqa. Throws
// std::invalid_argument for softcap or dropout (SDPA would draw its own mask).
TorchReference torch_sdpa_math_public(const AttnParams& params, Precision precision,
                                      const double* q, const double* k, const double* v,
                                      const double* dout);

// Makes LibTorch's CPU results the same on every x86-64 machine, for comparisons that count
// bit-identical elements: its vectorised kernels run their portable build (ATEN_CPU_CAPABILITY
// = default, so a reduction no longer sums in AVX2- or AVX-512-wide blocks) and oneDNN is off
// (it serves bf16 / fp16 matmuls on AVX-512 and AMX machines only). LibTorch reads the
// capability once, at its first dispatched op: call this before any. Returns the capability
// then in force ("DEFAULT" when the pin took).
std::string pin_torch_cpu_isa();

}  // namespace attnscope
