// Naive fp64 attention forward and backward that materialises every intermediate
// (DESIGN §3): the test oracle and the data source for full-resolution heatmaps.
#pragma once

#include <vector>

#include "kernels/attn_params.h"

namespace attnscope {

// Everything the reference computes. Shapes (see AttnParams for the layout contract):
//   s, p, dp, ds [B, H, Sq, Sk]   m, l, lse, d [B, H, Sq]   o [B, H, Sq, Dv]
//   dq [B, H, Sq, D]   dk [B, Hk, Sk, D]   dv [B, Hk, Sk, Dv]
// s holds the final scores (after softcap, bias and mask fill); p the forward's undropped
// softmax (dropout enters o, not p); dp = z o (dO V^T) with z the dropout factor, the dP that
// enters dS; ds is dLoss/ds for those scores, ds = P (dp - d) with P the backward's (p itself
// under BackwardP::saved, exp(s - lse) under from_lse); the softcap derivative is applied
// inside dq / dk.
struct ReferenceTrace {
  std::vector<double> s, p, m, l, lse, o;
  std::vector<double> d, dp, ds, dq, dk, dv;
};

// Forward and backward of sum(O * dO); dout == nullptr means dO = 1 everywhere.
// q [B,H,Sq,D], k [B,Hk,Sk,D], v [B,Hk,Sk,Dv], dout [B,H,Sq,Dv], all contiguous.
ReferenceTrace reference_attention(const AttnParams& params, const double* q, const double* k,
                                   const double* v, const double* dout);

}  // namespace attnscope
