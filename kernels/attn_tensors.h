// The raw fp32 tensors of one attention run, shared by the CPU and CUDA kernels: inputs,
// caller-allocated forward and backward outputs, the forward results the fused backward reads,
// and owning results. Layouts as AttnParams (BHSD, contiguous). Named Cpu* after the kernels
// that introduced them; the CUDA kernels take the same inputs.
#pragma once

#include <vector>

namespace attnscope {

// Inputs as fp32 values; f16 / bf16 runs round them to the precision first (a no-op when the
// caller converted them from that precision). The bias is AttnParams::bias.
struct CpuAttnInputs {
  const float* q = nullptr;     // [B, H, Sq, D]
  const float* k = nullptr;     // [B, Hk, Sk, D]
  const float* v = nullptr;     // [B, Hk, Sk, Dv]
  const float* dout = nullptr;  // [B, H, Sq, Dv]; nullptr = all ones (backward only)
};

// Caller-allocated forward outputs. o holds values exactly representable in the precision.
struct CpuForwardOutputs {
  float* o = nullptr;    // [B, H, Sq, Dv]
  float* lse = nullptr;  // [B, H, Sq]  m + log l (fp32; rounded to the precision in unfused)
  float* m = nullptr;    // [B, H, Sq]  row max of the final scores
  float* l = nullptr;    // [B, H, Sq]  sum_j exp(s_ij - m_i)
};

// Forward results the fused backward reads (the unfused backward recomputes everything).
// BackwardP::from_lse recomputes the LSE from m and l bit for bit as the forward stored it.
struct CpuForwardView {
  const float* o = nullptr;  // [B, H, Sq, Dv]
  const float* m = nullptr;  // [B, H, Sq]
  const float* l = nullptr;  // [B, H, Sq]
};

// Caller-allocated backward outputs; dq, dk, dv hold values exact in the precision.
struct CpuBackwardOutputs {
  float* d = nullptr;   // [B, H, Sq]      rowsum(dO * O) (unfused: rowsum(dP * P)), fp32
  float* dq = nullptr;  // [B, H, Sq, D]
  float* dk = nullptr;  // [B, Hk, Sk, D]  summed over the query heads of each kv group
  float* dv = nullptr;  // [B, Hk, Sk, Dv] summed over the query heads of each kv group
};

// Owning results of cpu_attention; shapes as in CpuForwardOutputs / CpuBackwardOutputs.
struct CpuAttnResult {
  std::vector<float> o, lse, m, l;
  std::vector<float> d, dq, dk, dv;
};

}  // namespace attnscope
