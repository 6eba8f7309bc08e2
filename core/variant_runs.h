// Factories of the registry's variant runs (core/kernel_registry.h): native ones in
// core/native_variants.cpp, LibTorch ones in core/torch_variants.cpp. LibTorch-free.
#pragma once

#include <memory>

#include "core/kernel_registry.h"

namespace attnscope {

// kernels/reference in fp64; forward() computes forward and backward together (the naive
// reference has no separate backward), backward() does nothing.
std::unique_ptr<VariantRun> make_reference_run(const AttnParams& params, const RunConfig& config,
                                               const VariantInputs& inputs);

// kernels/cpu in config.mode at config.precision, on fp32 copies of the inputs.
std::unique_ptr<VariantRun> make_cpu_run(const AttnParams& params, const RunConfig& config,
                                         const VariantInputs& inputs);

// SDPA MATH's CPU semantics on the own kernel: the fused kernel at fp32 on inputs rounded to
// config.precision, then O, dQ, dK, dV rounded once to it (LSE stays fp32).
std::unique_ptr<VariantRun> make_cpu_upcast_run(const AttnParams& params, const RunConfig& config,
                                                const VariantInputs& inputs);

// LibTorch eager math attention op by op at the precision's dtype, backward by autograd.
std::unique_ptr<VariantRun> make_torch_eager_run(const AttnParams& params, const RunConfig& config,
                                                 const VariantInputs& inputs);

// at::_scaled_dot_product_attention_math at the precision's dtype, backward by autograd.
std::unique_ptr<VariantRun> make_torch_sdpa_math_run(const AttnParams& params,
                                                     const RunConfig& config,
                                                     const VariantInputs& inputs);

// PyTorch's CPU flash SDPA kernel (at::_scaled_dot_product_flash_attention_for_cpu and its
// backward) at the precision's dtype.
std::unique_ptr<VariantRun> make_torch_flash_cpu_run(const AttnParams& params,
                                                     const RunConfig& config,
                                                     const VariantInputs& inputs);

}  // namespace attnscope
