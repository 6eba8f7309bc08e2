// exact_dot_block / exact_gemm_update (exact64.h), compiled by Highway once per instruction set
// (foreach_target) with -ffp-contract=off; lanes hold different outputs, each rounded as the
// scalar tails round it.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/exact64.cpp"
#include "hwy/foreach_target.h"  // must precede highway.h
#include "hwy/highway.h"

#include <cstdint>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/exact64.h"

HWY_BEFORE_NAMESPACE();
namespace attnscope::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DD = hn::ScalableTag<double>;
using VD = hn::Vec<DD>;

// Register blocks: AVX-512 has 32 vector registers, the other sets 16.
#if HWY_TARGET <= HWY_AVX3
constexpr int kDotRows = 3, kGemmChunks = 4;
#else
constexpr int kDotRows = 1, kGemmChunks = 2;
#endif
constexpr int kDotChunks = 2, kGemmRows = 4;

// The scalar form of one output of the dots (the reference's dot, b strided by ld).
double DotStrided(const double* a, const double* b, int64_t n, int64_t ld) {
  double acc[4] = {0, 0, 0, 0};
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    for (int u = 0; u < 4; ++u) acc[u] += a[t + u] * b[(t + u) * ld];
  }
  for (; t < n; ++t) acc[0] += a[t] * b[t * ld];
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// kRows rows by kChunks vectors of outputs: four partial sums each.
template <int kRows, int kChunks>
HWY_INLINE void DotTile(const double* a, int64_t lda, const double* bt, int64_t n, int64_t ldbt,
                        double* c, int64_t ldc) {
  const DD d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  VD acc[4][kRows][kChunks];
  for (int u = 0; u < 4; ++u) {
    for (int r = 0; r < kRows; ++r) {
      for (int x = 0; x < kChunks; ++x) acc[u][r][x] = hn::Zero(d);
    }
  }
  const auto term = [&](int u, int64_t t) {
    VD b[kChunks];
    for (int x = 0; x < kChunks; ++x) b[x] = hn::LoadU(d, bt + t * ldbt + x * L);
    for (int r = 0; r < kRows; ++r) {
      const VD ar = hn::Set(d, a[r * lda + t]);
      for (int x = 0; x < kChunks; ++x) acc[u][r][x] = hn::Add(acc[u][r][x], hn::Mul(ar, b[x]));
    }
  };
  int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    for (int u = 0; u < 4; ++u) term(u, t + u);
  }
  for (; t < n; ++t) term(0, t);
  for (int r = 0; r < kRows; ++r) {
    for (int x = 0; x < kChunks; ++x) {
      const VD sum =
          hn::Add(hn::Add(acc[0][r][x], acc[1][r][x]), hn::Add(acc[2][r][x], acc[3][r][x]));
      hn::StoreU(sum, d, c + r * ldc + x * L);
    }
  }
}

// Columns [0, kChunks lanes) of the block, every row: the strip of bt stays in the L1 cache
// while every row reads it.
template <int kChunks>
HWY_INLINE void DotStrip(int64_t rows, int64_t n, const double* a, int64_t lda, const double* bt,
                         int64_t ldbt, double* c, int64_t ldc) {
  int64_t r = 0;
  for (; r + kDotRows <= rows; r += kDotRows) {
    DotTile<kDotRows, kChunks>(a + r * lda, lda, bt, n, ldbt, c + r * ldc, ldc);
  }
  for (; r < rows; ++r) DotTile<1, kChunks>(a + r * lda, lda, bt, n, ldbt, c + r * ldc, ldc);
}

void ExactDotBlock(int64_t rows, int64_t cols, int64_t n, const double* a, int64_t lda,
                   const double* bt, int64_t ldbt, double* c, int64_t ldc) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(DD()));
  int64_t x = 0;
  for (; x + kDotChunks * L <= cols; x += kDotChunks * L) {
    DotStrip<kDotChunks>(rows, n, a, lda, bt + x, ldbt, c + x, ldc);
  }
  for (; x + L <= cols; x += L) DotStrip<1>(rows, n, a, lda, bt + x, ldbt, c + x, ldc);
  for (; x < cols; ++x) {
    for (int64_t r = 0; r < rows; ++r) c[r * ldc + x] = DotStrided(a + r * lda, bt + x, n, ldbt);
  }
}

// kRows rows by kChunks vectors of C held in registers over every term.
template <int kRows, int kChunks>
HWY_INLINE void GemmTile(int64_t n, const double* a, int64_t lda, const double* b, int64_t ldb,
                         double* c, int64_t ldc) {
  const DD d;
  const int64_t L = static_cast<int64_t>(hn::Lanes(d));
  VD acc[kRows][kChunks];
  for (int r = 0; r < kRows; ++r) {
    for (int x = 0; x < kChunks; ++x) acc[r][x] = hn::LoadU(d, c + r * ldc + x * L);
  }
  for (int64_t t = 0; t < n; ++t) {
    VD bt[kChunks];
    for (int x = 0; x < kChunks; ++x) bt[x] = hn::LoadU(d, b + t * ldb + x * L);
    for (int r = 0; r < kRows; ++r) {
      const VD ar = hn::Set(d, a[r * lda + t]);
      for (int x = 0; x < kChunks; ++x) acc[r][x] = hn::Add(acc[r][x], hn::Mul(ar, bt[x]));
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int x = 0; x < kChunks; ++x) hn::StoreU(acc[r][x], d, c + r * ldc + x * L);
  }
}

// Columns [0, kChunks lanes) of C, every row: the strip of b stays in the L1 cache while every
// row reads it.
template <int kChunks>
HWY_INLINE void GemmStrip(int64_t rows, int64_t n, const double* a, int64_t lda, const double* b,
                          int64_t ldb, double* c, int64_t ldc) {
  int64_t r = 0;
  for (; r + kGemmRows <= rows; r += kGemmRows) {
    GemmTile<kGemmRows, kChunks>(n, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
  }
  for (; r < rows; ++r) GemmTile<1, kChunks>(n, a + r * lda, lda, b, ldb, c + r * ldc, ldc);
}

void ExactGemmUpdate(int64_t rows, int64_t cols, int64_t n, const double* a, int64_t lda,
                     const double* b, int64_t ldb, double* c, int64_t ldc) {
  const int64_t L = static_cast<int64_t>(hn::Lanes(DD()));
  int64_t x = 0;
  for (; x + kGemmChunks * L <= cols; x += kGemmChunks * L) {
    GemmStrip<kGemmChunks>(rows, n, a, lda, b + x, ldb, c + x, ldc);
  }
  for (; x + L <= cols; x += L) GemmStrip<1>(rows, n, a, lda, b + x, ldb, c + x, ldc);
  for (; x < cols; ++x) {
    for (int64_t r = 0; r < rows; ++r) {
      double sum = c[r * ldc + x];
      for (int64_t t = 0; t < n; ++t) sum += a[r * lda + t] * b[t * ldb + x];
      c[r * ldc + x] = sum;
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace attnscope::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attnscope::cpu {

HWY_EXPORT(ExactDotBlock);
HWY_EXPORT(ExactGemmUpdate);

void exact_dot_block(int64_t rows, int64_t cols, int64_t n, const double* a, int64_t lda,
                     const double* bt, int64_t ldbt, double* c, int64_t ldc) {
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(ExactDotBlock)(rows, cols, n, a, lda, bt, ldbt, c, ldc);
}

void exact_gemm_update(int64_t rows, int64_t cols, int64_t n, const double* a, int64_t lda,
                       const double* b, int64_t ldb, double* c, int64_t ldc) {
  choose_cpu_isa();
  HWY_DYNAMIC_DISPATCH(ExactGemmUpdate)(rows, cols, n, a, lda, b, ldb, c, ldc);
}

}  // namespace attnscope::cpu
#endif  // HWY_ONCE
