// The fp32 tile matmul gemm_tile (tile_math.h): a register-blocked micro-kernel compiled by
// Highway once per instruction set, like tile_math.cpp, and dispatched at run time to the one
// cpu_isa.h chose. Each element of C sums its products over k in order (FMA where the set has
// it), so results never depend on the thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/gemm_f32.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"
#include "kernels/cpu/tile_vec-inl.h"

#include "kernels/attn_check.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/tile_math.h"

HWY_BEFORE_NAMESPACE();
namespace attnscope::cpu {
namespace HWY_NAMESPACE {

// The gemm micro-kernel: kGemmRows x kGemmVecs accumulator registers, plus kGemmVecs B
// registers and the A broadcast, fit the register file (32 registers with AVX-512, else 16).
// Measured on a 64^3 tile (one Sapphire Rapids core): AVX-512 6 x 4 171 GFLOP/s, 12 x 2 161,
// 8 x 2 157, 4 x 4 146; AVX2 6 x 2 179, 5 x 2 169, 4 x 3 165.
constexpr int kGemmRows = 6;
constexpr int kGemmVecs = HWY_TARGET <= HWY_AVX3 ? 4 : 2;
static_assert(kGemmRows * kGemmVecs + kGemmVecs + 1 <= (HWY_TARGET <= HWY_AVX3 ? 32 : 16),
              "fits the registers");
// A full tile row is whole micro-kernel blocks, without a scalar tail.
static_assert(kTileCols % (kGemmVecs * kLanes) == 0, "tile rows are whole micro-kernel blocks");

// C block of MR rows x kLanes*NV columns: acc = sum_t A(r, t) B(t, x), then C (+)= alpha acc.
template <int MR, int NV>
HWY_INLINE void MicroKernel(int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                            int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate) {
  const D d;
  V acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int x = 0; x < NV; ++x) acc[r][x] = hn::Zero(d);
  }
  for (int64_t t = 0; t < k; ++t) {
    V bv[NV];
    for (int x = 0; x < NV; ++x) bv[x] = hn::LoadU(d, b + t * ldb + kLanes * x);
    for (int r = 0; r < MR; ++r) {
      const V ar = hn::Set(d, a[r * a_rs + t * a_cs]);
      for (int x = 0; x < NV; ++x) acc[r][x] = hn::MulAdd(ar, bv[x], acc[r][x]);
    }
  }
  const V va = hn::Set(d, alpha);
  for (int r = 0; r < MR; ++r) {
    for (int x = 0; x < NV; ++x) {
      float* out = c + r * ldc + kLanes * x;
      const V result =
          accumulate ? hn::MulAdd(va, acc[r][x], hn::LoadU(d, out)) : hn::Mul(va, acc[r][x]);
      hn::StoreU(result, d, out);
    }
  }
}

// The same for the last n < kLanes columns, one scalar at a time.
template <int MR>
HWY_INLINE void MicroKernelTail(int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                                const float* b, int64_t ldb, float* c, int64_t ldc, float alpha,
                                bool accumulate) {
  float acc[MR][kLanes] = {};
  for (int64_t t = 0; t < k; ++t) {
    for (int r = 0; r < MR; ++r) {
      const float ar = a[r * a_rs + t * a_cs];
      for (int64_t x = 0; x < n; ++x) acc[r][x] = MulAddLane(ar, b[t * ldb + x], acc[r][x]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int64_t x = 0; x < n; ++x) {
      float* out = c + r * ldc + x;
      *out = accumulate ? MulAddLane(alpha, acc[r][x], *out) : alpha * acc[r][x];
    }
  }
}

// MR rows of C across all n columns: kGemmVecs-register blocks, single registers, then scalars.
template <int MR>
HWY_INLINE void RowBlock(int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                         const float* b, int64_t ldb, float* c, int64_t ldc, float alpha,
                         bool accumulate) {
  int64_t x = 0;
  for (; x + kGemmVecs * kLanes <= n; x += kGemmVecs * kLanes) {
    MicroKernel<MR, kGemmVecs>(k, a, a_rs, a_cs, b + x, ldb, c + x, ldc, alpha, accumulate);
  }
  for (; x + kLanes <= n; x += kLanes) {
    MicroKernel<MR, 1>(k, a, a_rs, a_cs, b + x, ldb, c + x, ldc, alpha, accumulate);
  }
  if (x < n) {
    MicroKernelTail<MR>(n - x, k, a, a_rs, a_cs, b + x, ldb, c + x, ldc, alpha, accumulate);
  }
}

// RowBlock<rows> for the last rows < kGemmRows (the template argument counts down to it).
template <int MR>
HWY_INLINE void LastRows(int64_t rows, int64_t n, int64_t k, const float* a, int64_t a_rs,
                         int64_t a_cs, const float* b, int64_t ldb, float* c, int64_t ldc,
                         float alpha, bool accumulate) {
  if constexpr (MR > 0) {
    if (rows == MR) {
      RowBlock<MR>(n, k, a, a_rs, a_cs, b, ldb, c, ldc, alpha, accumulate);
    } else {
      LastRows<MR - 1>(rows, n, k, a, a_rs, a_cs, b, ldb, c, ldc, alpha, accumulate);
    }
  }
}

void GemmTile(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
              const float* b, int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate) {
  int64_t r = 0;
  for (; r + kGemmRows <= m; r += kGemmRows) {
    RowBlock<kGemmRows>(n, k, a + r * a_rs, a_rs, a_cs, b, ldb, c + r * ldc, ldc, alpha,
                        accumulate);
  }
  LastRows<kGemmRows - 1>(m - r, n, k, a + r * a_rs, a_rs, a_cs, b, ldb, c + r * ldc, ldc, alpha,
                          accumulate);
}

}  // namespace HWY_NAMESPACE
}  // namespace attnscope::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnscope::cpu {

HWY_EXPORT(GemmTile);

void gemm_tile(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
               const float* b, int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate) {
  ATTNSCOPE_DCHECK(m >= 0 && n >= 0 && k >= 0 && ldb >= n && ldc >= n);
  ATTNSCOPE_DCHECK(m == 0 || n == 0 ||
                   (c != nullptr && (k == 0 || (a != nullptr && b != nullptr))));
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(GemmTile)(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, alpha, accumulate);
}

}  // namespace attnscope::cpu
#endif  // HWY_ONCE
