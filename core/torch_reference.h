// fp64 LibTorch autograd "math attention" over AttnParams: the independent second oracle that
// the naive reference kernel (kernels/reference) must agree with to ~1e-12.
#pragma once

#include <vector>

#include "kernels/attn_params.h"

namespace attnscope {

// Outputs of the LibTorch computation, same shapes as ReferenceTrace:
//   o [B, H, Sq, Dv]   lse [B, H, Sq]   dq [B, H, Sq, D]   dk [B, Hk, Sk, D]   dv [B, Hk, Sk, Dv]
struct TorchReference {
  std::vector<double> o, lse, dq, dk, dv;
};

// Forward with at:: ops (matmul, tanh softcap, mask / causal / bias, softmax) and the backward
// of sum(O * dO) by autograd; dout == nullptr means dO = 1. Layouts as in AttnParams; mask and
// bias are read through their broadcast strides. Fill policies follow DESIGN §3 like the
// reference kernel (MaskFill::safe emulates PyTorch's safe softmax). Throws c10::Error (a
// std::exception) if LibTorch rejects the shapes.
TorchReference torch_reference_attention(const AttnParams& params, const double* q, const double* k,
                                         const double* v, const double* dout);

}  // namespace attnscope
