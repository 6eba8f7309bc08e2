// The tile transposes of tile_math.h (fp32 values and bf16 pair words alike, moved bit for
// bit): 4 x 4 blocks through 128-bit registers, compiled by Highway once per instruction set
// like tile_math.cpp and dispatched at run time to the one cpu_isa.h chose.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/transpose.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"

#include <cstdint>

#include "kernels/attn_check.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/tile_math.h"

HWY_BEFORE_NAMESPACE();
namespace attnscope::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst(x, r) = src(r, x) for r in [r0, r1), x in [x0, cols), one element at a time.
template <typename T>
HWY_INLINE void TransposeEach(int64_t r0, int64_t r1, int64_t x0, int64_t cols, const T* src,
                              int64_t ld_src, T* dst, int64_t ld_dst) {
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t x = x0; x < cols; ++x) dst[x * ld_dst + r] = src[r * ld_src + x];
  }
}

// T: a 32-bit lane type (float, uint32_t); shuffles move its bits unchanged.
template <typename T>
HWY_INLINE void TransposeBlocks(int64_t rows, int64_t cols, const T* src, int64_t ld_src, T* dst,
                                int64_t ld_dst) {
  int64_t r = 0;
#if HWY_TARGET != HWY_SCALAR  // SCALAR holds one lane per register
  const hn::Full128<T> d;
  for (; r + 4 <= rows; r += 4) {
    const T* s = src + r * ld_src;
    int64_t x = 0;
    for (; x + 4 <= cols; x += 4) {
      const auto r0 = hn::LoadU(d, s + x), r1 = hn::LoadU(d, s + ld_src + x);
      const auto r2 = hn::LoadU(d, s + 2 * ld_src + x), r3 = hn::LoadU(d, s + 3 * ld_src + x);
      // Lanes (r0[0], r1[0], r0[1], r1[1]), (r2[0], r3[0], ...), and the same of lanes 2, 3.
      const auto lo01 = hn::InterleaveLower(d, r0, r1), lo23 = hn::InterleaveLower(d, r2, r3);
      const auto hi01 = hn::InterleaveUpper(d, r0, r1), hi23 = hn::InterleaveUpper(d, r2, r3);
      T* o = dst + x * ld_dst + r;
      hn::StoreU(hn::ConcatLowerLower(d, lo23, lo01), d, o);
      hn::StoreU(hn::ConcatUpperUpper(d, lo23, lo01), d, o + ld_dst);
      hn::StoreU(hn::ConcatLowerLower(d, hi23, hi01), d, o + 2 * ld_dst);
      hn::StoreU(hn::ConcatUpperUpper(d, hi23, hi01), d, o + 3 * ld_dst);
    }
    TransposeEach(r, r + 4, x, cols, src, ld_src, dst, ld_dst);
  }
#endif
  TransposeEach(r, rows, 0, cols, src, ld_src, dst, ld_dst);
}

void TransposeF32(int64_t rows, int64_t cols, const float* src, int64_t ld_src, float* dst,
                  int64_t ld_dst) {
  TransposeBlocks(rows, cols, src, ld_src, dst, ld_dst);
}

void TransposeWords(int64_t rows, int64_t cols, const uint32_t* src, int64_t ld_src, uint32_t* dst,
                    int64_t ld_dst) {
  TransposeBlocks(rows, cols, src, ld_src, dst, ld_dst);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnscope::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnscope::cpu {

HWY_EXPORT(TransposeF32);
HWY_EXPORT(TransposeWords);

void transpose(int64_t rows, int64_t cols, const float* src, int64_t ld_src, float* dst,
               int64_t ld_dst) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && ld_src >= cols && ld_dst >= rows);
  ATTNSCOPE_DCHECK(rows == 0 || cols == 0 || (src != nullptr && dst != nullptr));
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(TransposeF32)(rows, cols, src, ld_src, dst, ld_dst);
}

void transpose_words(int64_t rows, int64_t cols, const uint32_t* src, int64_t ld_src, uint32_t* dst,
                     int64_t ld_dst) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && ld_src >= cols && ld_dst >= rows);
  ATTNSCOPE_DCHECK(rows == 0 || cols == 0 || (src != nullptr && dst != nullptr));
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(TransposeWords)(rows, cols, src, ld_src, dst, ld_dst);
}

}  // namespace attnscope::cpu
#endif  // HWY_ONCE
