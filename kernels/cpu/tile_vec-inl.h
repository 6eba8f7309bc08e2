// Highway basics shared by the per-instruction-set kernel files (tile_math.cpp, gemm_f32.cpp):
// the fp32 vector type and lane count of the target, and a scalar FMA rounded as its vectors
// round. Included once per target by each file's foreach_target pass, so the include guard
// toggles with HWY_TARGET_TOGGLE instead of #pragma once.
#if defined(ATTNSCOPE_KERNELS_CPU_TILE_VEC_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef ATTNSCOPE_KERNELS_CPU_TILE_VEC_INL_H_
#undef ATTNSCOPE_KERNELS_CPU_TILE_VEC_INL_H_
#else
#define ATTNSCOPE_KERNELS_CPU_TILE_VEC_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace attnscope::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<D>;
using DI = hn::RebindToSigned<D>;
using V = hn::Vec<D>;
// fp32 lanes of one register: 16 (AVX-512), 8 (AVX2), 4 (SSE4; the portable path with clang),
// 1 (the portable path with GCC < 12.3, Highway's SCALAR).
constexpr int64_t kLanes = HWY_LANES(float);

// a * b + c rounded as the set's vector MulAdd rounds it (one FMA where the set has FMA), for
// scalar tails that must match the vector lanes whatever the compiler contracts.
HWY_INLINE float MulAddLane(float a, float b, float c) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(hn::MulAdd(hn::Set(d1, a), hn::Set(d1, b), hn::Set(d1, c)));
}

}  // namespace HWY_NAMESPACE
}  // namespace attnscope::cpu
HWY_AFTER_NAMESPACE();

#endif  // ATTNSCOPE_KERNELS_CPU_TILE_VEC_INL_H_
