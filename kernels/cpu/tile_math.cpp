// Vectorised fp32 tile math on GCC / Clang vector extensions (8 lanes = one AVX2 register
// when built with -mavx2 -mfma; plain SSE or scalar code elsewhere).
#include "kernels/cpu/tile_math.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attn_check.h"
#include "kernels/precision.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace attnscope::cpu {
namespace {

typedef float v8f __attribute__((vector_size(32)));
typedef uint32_t v8u __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;
static_assert(sizeof(v8f) == kLanes * sizeof(float), "one v8f is kLanes fp32 lanes");
// A full tile row is whole 16-wide micro-kernel blocks (two registers), without a scalar tail.
static_assert(kTileCols % (2 * kLanes) == 0, "tile rows are whole 16-wide blocks");

inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store8(float* p, v8f v) {
  std::memcpy(p, &v, sizeof v);
}

inline v8f splat(float x) {
  return v8f{} + x;
}

// Bit cast between same-size vector types.
template <typename To, typename From>
inline To reinterpret_bits(From x) {
  To y;
  static_assert(sizeof x == sizeof y, "same size");
  std::memcpy(&y, &x, sizeof y);
  return y;
}

inline float hsum(v8f v) {
  float s = 0;
  for (int x = 0; x < kLanes; ++x) s += v[x];
  return s;
}

// exp(x) = 2^n exp(r), n = round(x / ln 2), |r| <= ln2 / 2, exp(r) by the Cephes expf
// polynomial. 2^n is built in the exponent bits as 2^(n-1) * 2 so n = 128 still works.
inline v8f exp8(v8f x) {
  const v8f lo = splat(-87.0f), hi = splat(88.8f), magic = splat(12582912.0f);  // 1.5 * 2^23
  v8f xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  const v8f t = xc * 1.44269504088896341f + magic;  // round(x log2 e) in the low mantissa
  const v8f n = t - magic;
  v8f r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  v8f p = r * 1.9875691500e-4f + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const v8u bits = ((reinterpret_bits<v8u>(t) - 0x4B400000u) + 126u) << 23;
  const v8f y = p * reinterpret_bits<v8f>(bits) * 2.0f;
  return x < splat(-86.5f) ? splat(0.0f) : y;
}

// Round to bfloat16 as float_to_bf16_bits: nearest-even on the top 16 bits, NaN made quiet.
inline v8f round8_bf16(v8f x) {
  const v8u u = reinterpret_bits<v8u>(x);
  const v8u rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const v8u quiet_nan = (u & 0xffff0000u) | 0x00400000u;
  return reinterpret_bits<v8f>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// C block of MR rows x 8*NV columns: acc = sum_t A(r, t) B(t, x), then C (+)= alpha * acc.
template <int MR, int NV>
void micro_kernel(int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
                  int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate) {
  v8f acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int x = 0; x < NV; ++x) acc[r][x] = v8f{};
  }
  for (int64_t t = 0; t < k; ++t) {
    v8f bv[NV];
    for (int x = 0; x < NV; ++x) bv[x] = load8(b + t * ldb + kLanes * x);
    for (int r = 0; r < MR; ++r) {
      const float ar = a[r * a_rs + t * a_cs];
      for (int x = 0; x < NV; ++x) acc[r][x] += ar * bv[x];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int x = 0; x < NV; ++x) {
      float* out = c + r * ldc + kLanes * x;
      const v8f scaled = alpha * acc[r][x];
      store8(out, accumulate ? load8(out) + scaled : scaled);
    }
  }
}

// The same for the last n < 8 columns, one scalar at a time.
template <int MR>
void micro_kernel_tail(int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                       const float* b, int64_t ldb, float* c, int64_t ldc, float alpha,
                       bool accumulate) {
  float acc[MR][kLanes] = {};
  for (int64_t t = 0; t < k; ++t) {
    for (int r = 0; r < MR; ++r) {
      const float ar = a[r * a_rs + t * a_cs];
      for (int64_t x = 0; x < n; ++x) acc[r][x] += ar * b[t * ldb + x];
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int64_t x = 0; x < n; ++x) {
      const float scaled = alpha * acc[r][x];
      c[r * ldc + x] = accumulate ? c[r * ldc + x] + scaled : scaled;
    }
  }
}

// MR rows of C across all n columns: 16-wide blocks, one 8-wide block, then scalars.
template <int MR>
void row_block(int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* b,
               int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate) {
  int64_t x = 0;
  for (; x + 2 * kLanes <= n; x += 2 * kLanes) {
    micro_kernel<MR, 2>(k, a, a_rs, a_cs, b + x, ldb, c + x, ldc, alpha, accumulate);
  }
  if (x + kLanes <= n) {
    micro_kernel<MR, 1>(k, a, a_rs, a_cs, b + x, ldb, c + x, ldc, alpha, accumulate);
    x += kLanes;
  }
  if (x < n) {
    micro_kernel_tail<MR>(n - x, k, a, a_rs, a_cs, b + x, ldb, c + x, ldc, alpha, accumulate);
  }
}

}  // namespace

void gemm_tile(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
               const float* b, int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate) {
  ATTNSCOPE_DCHECK(m >= 0 && n >= 0 && k >= 0 && ldb >= n && ldc >= n);
  ATTNSCOPE_DCHECK(m == 0 || n == 0 ||
                   (c != nullptr && (k == 0 || (a != nullptr && b != nullptr))));
  constexpr int kRows = 6;  // 6 x 16 accumulators = 12 of the 16 AVX2 registers
  // The accumulators plus the two B vectors of micro_kernel<kRows, 2> stay in registers.
  static_assert(kRows * 2 + 2 <= 16, "micro-kernel fits the 16 AVX2 registers");
  int64_t r = 0;
  for (; r + kRows <= m; r += kRows) {
    row_block<kRows>(n, k, a + r * a_rs, a_rs, a_cs, b, ldb, c + r * ldc, ldc, alpha, accumulate);
  }
  const float* a_rest = a + r * a_rs;
  float* c_rest = c + r * ldc;
  switch (m - r) {
    case 5:
      row_block<5>(n, k, a_rest, a_rs, a_cs, b, ldb, c_rest, ldc, alpha, accumulate);
      break;
    case 4:
      row_block<4>(n, k, a_rest, a_rs, a_cs, b, ldb, c_rest, ldc, alpha, accumulate);
      break;
    case 3:
      row_block<3>(n, k, a_rest, a_rs, a_cs, b, ldb, c_rest, ldc, alpha, accumulate);
      break;
    case 2:
      row_block<2>(n, k, a_rest, a_rs, a_cs, b, ldb, c_rest, ldc, alpha, accumulate);
      break;
    case 1:
      row_block<1>(n, k, a_rest, a_rs, a_cs, b, ldb, c_rest, ldc, alpha, accumulate);
      break;
    default:
      break;
  }
}

void transpose(int64_t rows, int64_t cols, const float* src, int64_t ld_src, float* dst,
               int64_t ld_dst) {
  ATTNSCOPE_DCHECK(rows >= 0 && cols >= 0 && ld_src >= cols && ld_dst >= rows);
  ATTNSCOPE_DCHECK(rows == 0 || cols == 0 || (src != nullptr && dst != nullptr));
  constexpr int64_t kBlock = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kBlock) {
    const int64_t r1 = r0 + kBlock < rows ? r0 + kBlock : rows;
    for (int64_t x = 0; x < cols; ++x) {
      for (int64_t r = r0; r < r1; ++r) dst[x * ld_dst + r] = src[r * ld_src + x];
    }
  }
}

float exp_f32(float x) {
  return exp8(splat(x))[0];
}

float exp_shifted_sum(const float* s, float base, float* p, int64_t n) {
  v8f acc{};
  int64_t x = 0;
  for (; x + kLanes <= n; x += kLanes) {
    const v8f e = exp8(load8(s + x) - base);
    store8(p + x, e);
    acc += e;
  }
  float sum = hsum(acc);
  for (; x < n; ++x) {
    p[x] = exp_f32(s[x] - base);
    sum += p[x];
  }
  return sum;
}

void exp_shifted_scaled(const float* s, float base, float factor, float* p, int64_t n) {
  int64_t x = 0;
  for (; x + kLanes <= n; x += kLanes) store8(p + x, exp8(load8(s + x) - base) * factor);
  for (; x < n; ++x) p[x] = exp_f32(s[x] - base) * factor;
}

float max_propagating_nan(const float* x, int64_t n) {
  // A lane takes v when v is larger or NaN; once NaN it stays NaN (NaN > v is false).
  v8f m8 = splat(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const v8f v = load8(x + i);
    m8 = (v > m8) | (v != v) ? v : m8;
  }
  float m = m8[0];
  for (int lane = 1; lane < kLanes; ++lane) m = max_propagating_nan(m, m8[lane]);
  for (; i < n; ++i) m = max_propagating_nan(m, x[i]);
  return m;
}

float dot_f32(const float* a, const float* b, int64_t n) {
  v8f acc{};
  int64_t x = 0;
  for (; x + kLanes <= n; x += kLanes) acc += load8(a + x) * load8(b + x);
  float sum = hsum(acc);
  for (; x < n; ++x) sum += a[x] * b[x];
  return sum;
}

void scale_in_place(float* x, float alpha, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= alpha;
}

void round_copy(Precision precision, const float* src, float* dst, int64_t n) {
  int64_t i = 0;
  if (precision == Precision::bf16) {
    for (; i + kLanes <= n; i += kLanes) store8(dst + i, round8_bf16(load8(src + i)));
  } else if (precision == Precision::f16) {
#if defined(__F16C__)
    // The hardware conversion rounds to nearest even, overflows to inf, keeps subnormals and
    // quiets NaN exactly as float_to_half_bits.
    for (; i + kLanes <= n; i += kLanes) {
      const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(half));
    }
#endif
  } else {
    if (dst != src) std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  for (; i < n; ++i) dst[i] = round_to(precision, src[i]);
}

// x * 0 is 0 for finite x and NaN otherwise, so a sum of such products is NaN iff some entry
// is non-finite (it never overflows). Eight accumulators hide the add latency.
bool all_finite(const float* x, int64_t n) {
  constexpr int kAcc = 8;
  v8f acc[kAcc] = {};
  int64_t i = 0;
  for (; i + kAcc * kLanes <= n; i += kAcc * kLanes) {
    for (int a = 0; a < kAcc; ++a) acc[a] += load8(x + i + a * kLanes) * 0.0f;
  }
  for (; i + kLanes <= n; i += kLanes) acc[0] += load8(x + i) * 0.0f;
  for (int a = 1; a < kAcc; ++a) acc[0] += acc[a];
  float sum = hsum(acc[0]);
  for (; i < n; ++i) sum += x[i] * 0.0f;
  return sum == sum;
}

// An fp32 is finite iff its magnitude bits are at most those of FLT_MAX.
constexpr uint32_t kAbsMask = 0x7fffffffu, kMaxFiniteBits = 0x7f7fffffu;

int64_t count_nonfinite(const float* x, int64_t n) {
  if (all_finite(x, n)) return 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += (float_bits(x[i]) & kAbsMask) > kMaxFiniteBits;
  return count;
}

int64_t finite_max(const float* x, int64_t n, float* max_abs, float* max) {
  float best_abs = 0, best = -std::numeric_limits<float>::infinity();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) {
      ++count;
      continue;
    }
    best_abs = std::max(best_abs, std::fabs(x[i]));
    best = std::max(best, x[i]);
  }
  *max_abs = best_abs;
  *max = best;
  return count;
}

bool finite_block_max(const float* x, int64_t rows, int64_t cols, int64_t ld, const float* shift,
                      float* max_shifted, float* max_abs) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  v8f mabs{}, mx = splat(-kInf), sentinel{};
  float tail_abs = 0, tail_mx = -kInf, tail_sentinel = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_r = x + r * ld;
    const v8f sh = splat(shift[r]);
    int64_t i = 0;
    for (; i + kLanes <= cols; i += kLanes) {
      const v8f v = load8(x_r + i);
      const v8f a = reinterpret_bits<v8f>(reinterpret_bits<v8u>(v) & kAbsMask);
      const v8f d = v - sh;
      mabs = a > mabs ? a : mabs;
      mx = d > mx ? d : mx;
      sentinel += v * 0.0f;
    }
    for (; i < cols; ++i) {
      tail_abs = std::max(tail_abs, std::fabs(x_r[i]));
      tail_mx = std::max(tail_mx, x_r[i] - shift[r]);
      tail_sentinel += x_r[i] * 0.0f;
    }
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    tail_abs = std::max(tail_abs, mabs[lane]);
    tail_mx = std::max(tail_mx, mx[lane]);
  }
  *max_abs = tail_abs;
  *max_shifted = tail_mx;
  return hsum(sentinel) + tail_sentinel == 0.0f;
}

}  // namespace attnscope::cpu
