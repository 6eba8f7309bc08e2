// The registry's GPU variants (built only when nvcc exists, ATTNSCOPE_WITH_CUDA): the own CUDA
// fused kernel (kernels/cuda) and PyTorch's CUDA SDPA backends (flash, memory-efficient, cuDNN)
// on LibTorch CUDA tensors. Added to the table only when a CUDA device is present, so CPU-only
// machines list exactly the CPU variants. LibTorch-free header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/kernel_registry.h"

namespace attnscope {

// Appends cuda-fused, torch-cuda-flash, torch-cuda-efficient and torch-cuda-cudnn when
// cuda::device_count() > 0 (the torch-cuda ones only once LibTorch's CUDA library loaded).
void add_cuda_variants(std::vector<KernelVariant>& table);

// The own CUDA kernel at config.precision with config.instrument; outputs fp64 copies.
std::unique_ptr<VariantRun> make_cuda_fused_run(const AttnParams& params, const RunConfig& config,
                                                const VariantInputs& inputs);

// Loads libtorch_cuda.so next to the LibTorch this binary runs (once; RTLD_GLOBAL so its CUDA
// kernels register with the dispatcher). Empty on success, else why it failed.
std::string load_torch_cuda();

// PyTorch SDPA backend on CUDA tensors: "flash", "efficient" or "cudnn".
std::unique_ptr<VariantRun> make_torch_cuda_run(const std::string& backend,
                                                const AttnParams& params, const RunConfig& config,
                                                const VariantInputs& inputs);

// Why the SDPA backend cannot run params (empty when it can).
std::string torch_cuda_unsupported(const std::string& backend, const AttnParams& params);

}  // namespace attnscope
