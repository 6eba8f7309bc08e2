// Memory plan of analyze_case (issue 7): what a case's analysis holds besides the loaded case,
// estimated from its dimensions before anything is allocated, checked against the memory
// budget (core/memory_budget.h).
#pragma once

#include <cstdint>

#include "core/case_model.h"

namespace attnscope {

// Bytes analyze_case holds at its peak, after the kernel runs (saturating), with E_q = B*H*Sq*D,
// E_o = B*H*Sq*Dv, E_k = B*Hk*Sk*D, E_v = B*Hk*Sk*Dv, R = B*H*Sq rows, `extra` = mask and bias
// elements, and one head of the largest tensor X = max(Sq, Sk) * max(D, Dv):
//   extra       mask and bias in fp64 (q, k, v, dO are read from  8 extra
//               the loaded case; their fp32 copies for the kernels
//               are freed before the reference is made)
//   each run    o, dq, dk, dv fp32 and 8 fp32 row values          4 (E_o + E_q + E_k + E_v) + 32 R
//   fp64 ref.   o, lse, dq, dk, dv and the rows' m, l              8 (E_o + E_q + E_k + E_v + 3 R)
//   recorded    one head of a recording and of a run in fp64      16 X
int64_t analysis_bytes(const CaseDims& d, int64_t extra_elements, int64_t runs, bool recorded);

}  // namespace attnscope
