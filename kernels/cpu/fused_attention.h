// CPU attention forward and backward with precision emulation (DESIGN §3): the tiled
// FlashAttention-2 kernel ("fused") and the op-by-op eager one ("unfused"), on raw fp32 arrays
// plus the shared AttnParams. Instrumentation: attn_trace.h; per-head S, P, dP, dS (full or
// pooled): head_matrices.h; the backward step by step: backward_stepper.h.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "kernels/attn_params.h"
#include "kernels/cpu/attn_trace.h"

namespace attnscope {

struct PooledCapture;

// Which kernel the CPU emulates at params.precision (f32, f16, bf16; f64 runs as f32):
//   fused:   FlashAttention-2. Q, K, V, dO (and bias) rounded to the precision; matmuls, the
//            online softmax, m, l, LSE and D in fp32; P rounded before P V and P^T dO; dS
//            rounded before dS K and dS^T Q; dQ accumulated in fp32; O, dQ, dK, dV rounded
//            once when stored. The mask fill value stays fp32 (-1e9 stays finite). Dropout:
//            round(P) o keep is the operand of P V and P^T dO; 1 / (1 - p) in fp32 multiplies
//            1 / l in the forward epilogue, dP before dS and dV's accumulator before its store.
//            The backward's P follows AttnParams::backward_p (from m and l, or exp(S - LSE)).
//   unfused: eager math attention. Every op's output rounded: Q K^T, the scaling, softcap,
//            bias add, the fill value, softmax (computed in fp32 from rounded scores), dropout
//            (P * round(1 / (1 - p))), P V, LSE, and in the backward dV, dP (and its dropout),
//            dS, the softcap and scale multiplies, dQ, dK. The backward uses the saved softmax
//            output whatever AttnParams::backward_p says.
enum class Mode : uint8_t { fused, unfused };

struct CpuAttnOptions {
  Mode mode = Mode::fused;
  int threads = 0;  // worker threads; 0 = std::thread::hardware_concurrency()
  // Instrumentation (kernels/cpu/attn_trace.h): when set, a forward fills trace->forward and a
  // backward trace->backward. Outputs are bit-identical with and without it.
  CpuTrace* trace = nullptr;
  // When set, a backward also pools S, P, dP, dS of one head on the way (head_matrices.h);
  // the outputs are bit-identical with and without it.
  PooledCapture* pooled = nullptr;
  // Polled from the worker threads (so it must be thread-safe) before every tile (fused) or
  // row block (unfused) and every q tile of the head matrices; once it returns true the call
  // stops within about one tile per worker and throws KernelCancelled. Outputs, trace and
  // pooled capture are then incomplete and must not be used. Unset: never polled; polling
  // changes no output bit.
  std::function<bool()> cancelled;
};

// Thrown by the CPU entry points (here and in head_matrices.h) when CpuAttnOptions::cancelled
// returned true during the call.
class KernelCancelled : public std::runtime_error {
 public:
  KernelCancelled() : std::runtime_error("cpu_attention: cancelled") {}
};

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

// Fully masked rows (every score -inf: bool mask, causal, or -inf bias) follow the reference
// (kernels/reference): MaskFill::safe gives O = 0, l = 0, LSE = -inf and zero gradients;
// neg_inf gives NaN in O, l, LSE and the gradients that row touches, as PyTorch eager does;
// the finite fills (-1e9, finfo.min) give a uniform row. Real FlashAttention returns 0 for
// such a row; pick MaskFill::safe to see that behaviour.
void cpu_attention_forward(const AttnParams& params, const CpuAttnOptions& options,
                           const CpuAttnInputs& inputs, const CpuForwardOutputs& out);

// Backward of sum(O * dO). `fwd` must hold the fused forward's outputs for the same inputs
// (ignored in unfused mode).
void cpu_attention_backward(const AttnParams& params, const CpuAttnOptions& options,
                            const CpuAttnInputs& inputs, const CpuForwardView& fwd,
                            const CpuBackwardOutputs& out);

// Owning results of cpu_attention; shapes as in CpuForwardOutputs / CpuBackwardOutputs.
struct CpuAttnResult {
  std::vector<float> o, lse, m, l;
  std::vector<float> d, dq, dk, dv;
};

// Forward then backward, allocating every output.
CpuAttnResult cpu_attention(const AttnParams& params, const CpuAttnOptions& options,
                            const CpuAttnInputs& inputs);

}  // namespace attnscope
