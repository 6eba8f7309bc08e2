// One (batch, head) of a case cut out as its own B = H = Hk = 1 problem (plain C++, no Qt): the
// inputs as fp32 for the CPU kernels and fp64 for the registry variants, the params with mask /
// bias pointers offset into the owning CaseInputs (strides kept), which must outlive the slice.
#pragma once

#include <cstdint>
#include <vector>

#include "core/case_inputs.h"
#include "core/kernel_registry.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

struct HeadSlice {
  AttnParams params;                 // batch = heads = kv_heads = 1
  std::vector<float> q, k, v, dout;  // [Sq, D], [Sk, D], [Sk, Dv], [Sq, Dv] (dout may be empty)
  std::vector<double> q64, k64, v64, dout64;  // the same values in fp64

  CpuAttnInputs inputs() const {
    return {q.data(), k.data(), v.data(), dout.empty() ? nullptr : dout.data()};
  }
  VariantInputs variant_inputs() const {
    return {q64.data(), k64.data(), v64.data(), dout64.empty() ? nullptr : dout64.data()};
  }
};

// Head h of batch b (query head h reads kv head params.kv_head_of(h)) of `data`, with the
// parameters and masks of `in` (made from `data`; its q, k, v may be left empty,
// InputValues::none); b and h must be valid.
HeadSlice slice_head(const CaseData& data, const CaseInputs& in, int64_t b, int64_t h);

}  // namespace attnscope
