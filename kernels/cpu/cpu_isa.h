// The instruction set the CPU kernels run on. kernels/cpu/tile_math.cpp is compiled once per
// set (Highway), kernels/cpu/gemm_bf16.cpp for AVX512-BF16; one process runs one set at a time:
// the best this CPU and build have, or the one the environment variable ATTNSCOPE_CPU_ISA names
// (tests run every set this way).
#pragma once

#include <string>
#include <vector>

namespace attnscope::cpu {

// Names of the sets, best first: "avx512bf16" ("avx512" whose fused kernels multiply bf16
// operands by AVX512-BF16 dot products, gemm_bf16.h), "avx512" (AVX-512 F/BW/DQ/VL), "avx2"
// (AVX2 + FMA + F16C), "sse4" (SSE4.2), "sse2" (Highway's portable path built for the x86-64
// baseline: 128-bit EMU128, or one lane (SCALAR) with GCC < 12.3).
std::vector<std::string> cpu_isas_built();

// The built sets this CPU can run, best first; never empty ("sse2" runs everywhere).
std::vector<std::string> cpu_isas_available();

// The set in use.
std::string cpu_isa();

// True when the set in use is "avx512bf16".
bool bf16_dot_products();

// Makes `name` the set in use from the next kernel call on; no kernel may run meanwhile.
// False with *error (naming the sets available) when `name` is unknown or this CPU lacks it.
bool select_cpu_isa(const std::string& name, std::string* error);

// Chooses the set once per process, before the first kernel call: ATTNSCOPE_CPU_ISA when it
// is set (an unknown or unavailable name is reported on stderr once and the best set runs),
// else the best. Every dispatching kernel function calls it; later calls cost one load.
void choose_cpu_isa();

}  // namespace attnscope::cpu
