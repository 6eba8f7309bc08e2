// CPU attention forward and backward with precision emulation (DESIGN §3): the tiled
// FlashAttention-2 kernel ("fused") and the op-by-op eager one ("unfused", Mode in
// kernels/attn_types.h), on raw fp32 arrays (kernels/attn_tensors.h) plus the shared
// AttnParams. Instrumentation: kernels/attn_trace.h; per-head S, P, dP, dS (full or pooled):
// head_matrices.h; the backward step by step: backward_stepper.h.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "kernels/attn_params.h"
#include "kernels/attn_tensors.h"
#include "kernels/attn_trace.h"
#include "kernels/attn_types.h"

namespace attnscope {

struct PooledCapture;

struct CpuAttnOptions {
  Mode mode = Mode::fused;
  int threads = 0;  // worker threads; 0 = std::thread::hardware_concurrency()
  // Instrumentation (kernels/attn_trace.h): when set, a forward fills trace->forward and a
  // backward trace->backward. Outputs are bit-identical with and without it.
  CpuTrace* trace = nullptr;
  // When set, a backward also pools S, P, dP, dS of one head on the way (head_matrices.h);
  // the outputs are bit-identical with and without it.
  PooledCapture* pooled = nullptr;
  // When set, a fused forward pools S of one head on the way (its `which` selects S alone; the
  // forward throws std::invalid_argument otherwise or in unfused mode), the same bits as
  // `pooled` gives.
  PooledCapture* pooled_s = nullptr;
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

// Fully masked rows (every score -inf: bool mask, causal, or -inf bias) follow the reference
// (kernels/reference): MaskFill::safe gives O = 0, l = 0, LSE = -inf and zero gradients;
// neg_inf gives NaN in O, l, LSE and the gradients that row touches, as PyTorch eager does;
// the finite fills (-1e9, finfo.min) give a uniform row. Real FlashAttention returns 0 for
// such a row; pick MaskFill::safe to see that behaviour.
// out.o null: the row statistics alone (m, l, LSE, the bits a whole forward gives) and any
// pooled_s, without P V (about half the forward); fused mode without a trace only, else
// std::invalid_argument.
void cpu_attention_forward(const AttnParams& params, const CpuAttnOptions& options,
                           const CpuAttnInputs& inputs, const CpuForwardOutputs& out);

// Backward of sum(O * dO). `fwd` must hold the fused forward's outputs for the same inputs
// (ignored in unfused mode).
void cpu_attention_backward(const AttnParams& params, const CpuAttnOptions& options,
                            const CpuAttnInputs& inputs, const CpuForwardView& fwd,
                            const CpuBackwardOutputs& out);

// Forward then backward, allocating every output.
CpuAttnResult cpu_attention(const AttnParams& params, const CpuAttnOptions& options,
                            const CpuAttnInputs& inputs);
// cpu_attention in two calls: the forward (re)sizes and fills r.o, lse, m, l; the backward then
// r.d, dq, dk, dv from them. Bit for bit cpu_attention's results.
void cpu_attention_forward(const AttnParams& params, const CpuAttnOptions& options,
                           const CpuAttnInputs& inputs, CpuAttnResult& r);
void cpu_attention_backward(const AttnParams& params, const CpuAttnOptions& options,
                            const CpuAttnInputs& inputs, CpuAttnResult& r);

}  // namespace attnscope
