// AVX512-BF16 tile matmuls (see gemm_bf16.h). A and B are cut into pairs of bf16 along k, one
// 32-bit word per pair (Bf16Pairs), then a register-blocked micro-kernel adds one pair per
// vdpbf16ps. Only the functions marked ATTNSCOPE_AVX512_BF16 use AVX-512; the file is compiled
// for the x86-64 baseline and is entered only where the CPU has the set.
#include "kernels/cpu/gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/attn_check.h"
#include "kernels/cpu/tile_math.h"

namespace attnscope::cpu {
namespace {

constexpr int64_t kLanes = 16;  // fp32 lanes and bf16 pairs of one zmm register

// Bits of a bf16 value held in fp32 as the high half of a 32-bit word.
uint32_t high_half(const float* x) {
  uint32_t u;
  std::memcpy(&u, x, sizeof u);
  return u & 0xffff0000u;
}

// The pair word of lo = element t and hi = element t + 1 (null past k: 0).
uint32_t pair_word(const float* lo, const float* hi) {
  return (high_half(lo) >> 16) | (hi != nullptr ? high_half(hi) : 0u);
}

}  // namespace

// The AVX-512 functions: attributes rather than a target pragma, which clang ignores.
#define ATTNSCOPE_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace {

// kMicroRows x kMicroVecs accumulators + kMicroVecs B registers + the A broadcast <= 32.
constexpr int kMicroRows = 6;
constexpr int kMicroVecs = 4;

// Word indices for _mm512_permutex2var_epi16 over (v0, v1) (32 words each, v1's from 32 on)
// or _mm512_permutexvar_epi16: word i of the result is word word_of(i) of the source.
struct WordIndex {
  alignas(64) uint16_t w[32];
  template <typename F>
  explicit WordIndex(F word_of) {
    for (int i = 0; i < 32; ++i) w[i] = static_cast<uint16_t>(word_of(i));
  }
};

// The mask of the first `count` of 16 lanes (all of them from 16 on, none below 1).
__mmask16 lanes_below(int64_t count) {
  return count >= kLanes ? 0xffff : count > 0 ? static_cast<__mmask16>((1u << count) - 1) : 0;
}

// out[p * ldo + x] = pair(X(2p, x), X(2p + 1, x)) for p < ceil(k / 2), x < n, zero for
// n <= x < ldo: X [k x n] with row stride ldx. ldo is a multiple of kLanes.
ATTNSCOPE_AVX512_BF16 void pair_columns_avx512(int64_t k, int64_t n, const float* x, int64_t ldx,
                                               int64_t ldo, uint32_t* out) {
  // Word 2i: the high word of lane i of the even row; word 2i + 1: that of the odd row.
  static const WordIndex interleave([](int i) { return (i % 2 == 0 ? 0 : 32) + i / 2 * 2 + 1; });
  const __m512i idx = _mm512_load_si512(interleave.w);
  for (int64_t t = 0; t < k; t += 2) {
    const float* lo = x + t * ldx;
    const float* hi = t + 1 < k ? x + (t + 1) * ldx : nullptr;
    uint32_t* o = out + (t / 2) * ldo;
    int64_t c = 0;
    if (hi != nullptr) {
      for (; c + kLanes <= n; c += kLanes) {
        _mm512_storeu_si512(o + c, _mm512_permutex2var_epi16(_mm512_loadu_si512(lo + c), idx,
                                                             _mm512_loadu_si512(hi + c)));
      }
    }
    for (; c < ldo; c += kLanes) {
      const __mmask16 m = lanes_below(n - c);
      const __m512i h =
          hi != nullptr ? _mm512_maskz_loadu_epi32(m, hi + c) : _mm512_setzero_si512();
      _mm512_storeu_si512(o + c,
                          _mm512_permutex2var_epi16(_mm512_maskz_loadu_epi32(m, lo + c), idx, h));
    }
  }
}

// pair_columns_avx512 of round_to(bf16, X): vcvtne2ps2bf16 rounds to nearest even and quiets
// NaN as round_to does; it flushes denormals to 0, which vdpbf16ps makes of them anyway.
ATTNSCOPE_AVX512_BF16 void pair_columns_rounding_avx512(int64_t k, int64_t n, const float* x,
                                                        int64_t ldx, int64_t ldo, uint32_t* out) {
  // Word 2i: bf16 i of the even row (the low half of cvtne2ps's result), 2i + 1: of the odd row.
  static const WordIndex interleave([](int i) { return (i % 2 == 0 ? 0 : 16) + i / 2; });
  const __m512i idx = _mm512_load_si512(interleave.w);
  for (int64_t t = 0; t < k; t += 2) {
    const float* lo = x + t * ldx;
    const float* hi = t + 1 < k ? x + (t + 1) * ldx : nullptr;
    uint32_t* o = out + (t / 2) * ldo;
    for (int64_t c = 0; c < ldo; c += kLanes) {
      const __mmask16 m = lanes_below(n - c);
      const __m512 h = hi != nullptr ? _mm512_maskz_loadu_ps(m, hi + c) : _mm512_setzero_ps();
      const __m512bh words = _mm512_cvtne2ps_pbh(h, _mm512_maskz_loadu_ps(m, lo + c));
      _mm512_storeu_si512(o + c, _mm512_permutexvar_epi16(idx, (__m512i)words));
    }
  }
}

// pair_rows_avx512 of round_to(bf16, A): vcvtne2ps2bf16 rounds 32 floats into 32 bf16 in
// order, which are the row's pair words (rounding as in pair_columns_rounding_avx512).
ATTNSCOPE_AVX512_BF16 void pair_rows_rounding_avx512(int64_t m, int64_t k, const float* a,
                                                     int64_t lda, uint32_t* out) {
  const int64_t kp = (k + 1) / 2;
  for (int64_t r = 0; r < m; ++r) {
    const float* row = a + r * lda;
    uint32_t* o = out + r * kp;
    int64_t t = 0;
    for (; t + 2 * kLanes <= k; t += 2 * kLanes) {
      const __m512bh words =
          _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + t + kLanes), _mm512_loadu_ps(row + t));
      _mm512_storeu_si512(o + t / 2, (__m512i)words);
    }
    if (t < k) {  // the last k - t < 32 values, zero-padded to whole pairs
      const __mmask16 lo = lanes_below(k - t), hi = lanes_below(k - t - kLanes);
      const __m512bh words = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, row + t + kLanes),
                                                 _mm512_maskz_loadu_ps(lo, row + t));
      _mm512_mask_storeu_epi32(o + t / 2, lanes_below(kp - t / 2), (__m512i)words);
    }
  }
}

// out[r * kp + p] = pair(A(r, 2p), A(r, 2p + 1)), kp = ceil(k / 2): A [m x k] with rows
// contiguous (row stride lda).
ATTNSCOPE_AVX512_BF16 void pair_rows_avx512(int64_t m, int64_t k, const float* a, int64_t lda,
                                            uint32_t* out) {
  const int64_t kp = (k + 1) / 2;
  // Word i: the high word of element i of the 32 floats in (v0, v1).
  static const WordIndex odd_words([](int i) { return 2 * i + 1; });
  const __m512i idx = _mm512_load_si512(odd_words.w);
  for (int64_t r = 0; r < m; ++r) {
    const float* row = a + r * lda;
    uint32_t* o = out + r * kp;
    int64_t t = 0;
    for (; t + 2 * kLanes <= k; t += 2 * kLanes) {
      const __m512i v0 = _mm512_loadu_si512(row + t), v1 = _mm512_loadu_si512(row + t + kLanes);
      _mm512_storeu_si512(o + t / 2, _mm512_permutex2var_epi16(v0, idx, v1));
    }
    for (; t < k; t += 2) o[t / 2] = pair_word(row + t, t + 1 < k ? row + t + 1 : nullptr);
  }
}

// C rows [0, MR) x columns [0, 16 * NV) (the last register's columns limited by `last`) of
// alpha * (A B) (+ C where kAccumulate): A pair p of row r at ap[r * ap_rs + p * ap_ps], B pairs
// [kp x ldbp].
template <int MR, int NV, bool kAccumulate>
ATTNSCOPE_AVX512_BF16 inline void micro_kernel(int64_t kp, const uint32_t* ap, int64_t ap_rs,
                                               int64_t ap_ps, const uint32_t* bp, int64_t ldbp,
                                               __mmask16 last, float* c, int64_t ldc, float alpha) {
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < kp; ++p) {
    __m512bh bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(bp + p * ldbp + kLanes * v);
    for (int r = 0; r < MR; ++r) {
      const __m512bh ar = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r * ap_rs + p * ap_ps]));
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], ar, bv[v]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v == NV - 1 ? last : 0xffff;
      float* out = c + r * ldc + kLanes * v;
      const __m512 result = kAccumulate
                                ? _mm512_fmadd_ps(va, acc[r][v], _mm512_maskz_loadu_ps(m, out))
                                : _mm512_mul_ps(va, acc[r][v]);
      _mm512_mask_storeu_ps(out, m, result);
    }
  }
}

// MR rows of C across all n columns: blocks of kMicroVecs registers, then one of fewer.
template <int MR, bool kAccumulate>
ATTNSCOPE_AVX512_BF16 inline void row_block(int64_t n, int64_t kp, const uint32_t* ap,
                                            int64_t ap_rs, int64_t ap_ps, const uint32_t* bp,
                                            int64_t ldbp, float* c, int64_t ldc, float alpha) {
  int64_t x = 0;
  for (; x + kMicroVecs * kLanes <= n; x += kMicroVecs * kLanes) {
    micro_kernel<MR, kMicroVecs, kAccumulate>(kp, ap, ap_rs, ap_ps, bp + x, ldbp, 0xffff, c + x,
                                              ldc, alpha);
  }
  const int64_t rest = n - x;
  if (rest == 0) return;
  const __mmask16 last =
      rest % kLanes == 0 ? 0xffff : static_cast<__mmask16>((1u << (rest % kLanes)) - 1);
  switch ((rest + kLanes - 1) / kLanes) {  // 1 .. kMicroVecs registers, the last one masked
    case 1:
      micro_kernel<MR, 1, kAccumulate>(kp, ap, ap_rs, ap_ps, bp + x, ldbp, last, c + x, ldc, alpha);
      break;
    case 2:
      micro_kernel<MR, 2, kAccumulate>(kp, ap, ap_rs, ap_ps, bp + x, ldbp, last, c + x, ldc, alpha);
      break;
    case 3:
      micro_kernel<MR, 3, kAccumulate>(kp, ap, ap_rs, ap_ps, bp + x, ldbp, last, c + x, ldc, alpha);
      break;
    default:
      micro_kernel<MR, kMicroVecs, kAccumulate>(kp, ap, ap_rs, ap_ps, bp + x, ldbp, last, c + x,
                                                ldc, alpha);
      break;
  }
}

// row_block<rows> for the last rows < kMicroRows (the template argument counts down to it).
template <int MR, bool kAccumulate>
ATTNSCOPE_AVX512_BF16 inline void last_rows(int64_t rows, int64_t n, int64_t kp, const uint32_t* ap,
                                            int64_t ap_rs, int64_t ap_ps, const uint32_t* bp,
                                            int64_t ldbp, float* c, int64_t ldc, float alpha) {
  if constexpr (MR > 0) {
    if (rows == MR) {
      row_block<MR, kAccumulate>(n, kp, ap, ap_rs, ap_ps, bp, ldbp, c, ldc, alpha);
    } else {
      last_rows<MR - 1, kAccumulate>(rows, n, kp, ap, ap_rs, ap_ps, bp, ldbp, c, ldc, alpha);
    }
  }
}

template <bool kAccumulate>
ATTNSCOPE_AVX512_BF16 void gemm_pairs(int64_t m, int64_t n, int64_t kp, const uint32_t* ap,
                                      int64_t ap_rs, int64_t ap_ps, const uint32_t* bp,
                                      int64_t ldbp, float* c, int64_t ldc, float alpha) {
  int64_t r = 0;
  for (; r + kMicroRows <= m; r += kMicroRows) {
    row_block<kMicroRows, kAccumulate>(n, kp, ap + r * ap_rs, ap_rs, ap_ps, bp, ldbp, c + r * ldc,
                                       ldc, alpha);
  }
  last_rows<kMicroRows - 1, kAccumulate>(m - r, n, kp, ap + r * ap_rs, ap_rs, ap_ps, bp, ldbp,
                                         c + r * ldc, ldc, alpha);
}

// out[r] = the dot product of row r of a and b [rows x n], one vdpbf16ps per pair in order;
// kRows rows at a time (a constant, so that the sums live in registers), so that their
// dependency chains overlap.
template <int64_t kRows>
ATTNSCOPE_AVX512_BF16 void dot_rows_pairs(int64_t r, int64_t n, const float* a, const float* b,
                                          float* out) {
  const auto word = [n](const float* x, int64_t t) {
    return _mm_cvtsi32_si128(static_cast<int>(pair_word(x + t, t + 1 < n ? x + t + 1 : nullptr)));
  };
  __m128 acc[kRows];
  for (int64_t i = 0; i < kRows; ++i) acc[i] = _mm_setzero_ps();
  for (int64_t t = 0; t < n; t += 2) {
    for (int64_t i = 0; i < kRows; ++i) {
      const float* a_r = a + (r + i) * n;
      const float* b_r = b + (r + i) * n;
      acc[i] = _mm_dpbf16_ps(acc[i], (__m128bh)word(a_r, t), (__m128bh)word(b_r, t));
    }
  }
  for (int64_t i = 0; i < kRows; ++i) out[r + i] = _mm_cvtss_f32(acc[i]);
}

}  // namespace

bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
}

int64_t paired_ld(int64_t n) {
  return (n + kLanes - 1) / kLanes * kLanes;
}

void pair_rows(int64_t m, int64_t k, const float* x, int64_t ldx, uint32_t* out) {
  ATTNSCOPE_DCHECK(cpu_has_avx512_bf16() && m >= 0 && k >= 0 && ldx >= k);
  pair_rows_avx512(m, k, x, ldx, out);
}

void pair_columns(int64_t k, int64_t n, const float* x, int64_t ldx, uint32_t* out) {
  ATTNSCOPE_DCHECK(cpu_has_avx512_bf16() && k >= 0 && n >= 0 && ldx >= n);
  pair_columns_avx512(k, n, x, ldx, paired_ld(n), out);
}

void pair_rows_transposed(int64_t n, int64_t k, const float* x, int64_t ldx, int64_t ldo,
                          uint32_t* out) {
  ATTNSCOPE_DCHECK(cpu_has_avx512_bf16() && n >= 0 && k >= 0 && ldx >= k && ldo >= n);
  const int64_t kp = (k + 1) / 2;
  thread_local std::vector<uint32_t> rows;  // [n x kp]: pair_rows of X
  if (rows.size() < static_cast<size_t>(n * kp)) rows.resize(static_cast<size_t>(n * kp));
  pair_rows_avx512(n, k, x, ldx, rows.data());
  transpose_words(n, kp, rows.data(), kp, out, ldo);
  for (int64_t p = 0; p < kp && n < ldo; ++p) std::fill(out + p * ldo + n, out + (p + 1) * ldo, 0u);
}

void gemm_tile_bf16(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                    const float* b, int64_t ldb, float* c, int64_t ldc, float alpha,
                    bool accumulate, const Bf16Pairs& paired) {
  ATTNSCOPE_DCHECK(cpu_has_avx512_bf16());
  ATTNSCOPE_DCHECK(!paired.a_rounds || (paired.a == nullptr && (a_rs == 1 || a_cs == 1)));
  ATTNSCOPE_DCHECK(m >= 0 && n >= 0 && k >= 0 && ldb >= n && ldc >= n);
  if (m == 0 || n == 0) return;
  const int64_t kp = (k + 1) / 2;
  // Per-thread pairing buffers for the operands `paired` lacks, grown to the largest tile seen.
  thread_local std::vector<uint32_t> a_words, b_words;
  const auto words = [](std::vector<uint32_t>& v, int64_t n_words) {
    if (v.size() < static_cast<size_t>(n_words)) v.resize(static_cast<size_t>(n_words));
    return v.data();
  };
  Bf16Pairs op = paired;
  if (op.b == nullptr) {
    op.ldb = paired_ld(n);
    pair_columns(k, n, b, ldb, words(b_words, kp * op.ldb));
    op.b = b_words.data();
  }
  if (op.a == nullptr && a_cs == 1) {
    uint32_t* out = words(a_words, m * kp);
    if (paired.a_rounds) {
      pair_rows_rounding_avx512(m, k, a, a_rs, out);
    } else {
      pair_rows(m, k, a, a_rs, out);
    }
    op = {out, kp, 1, op.b, op.ldb};
  } else if (op.a == nullptr && a_rs == 1) {  // A = X^T with X [k x m]: X's columns paired
    uint32_t* out = words(a_words, kp * paired_ld(m));
    if (paired.a_rounds) {
      pair_columns_rounding_avx512(k, m, a, a_cs, paired_ld(m), out);
    } else {
      pair_columns(k, m, a, a_cs, out);
    }
    op = {a_words.data(), 1, paired_ld(m), op.b, op.ldb};
  } else if (op.a == nullptr) {
    uint32_t* out = words(a_words, m * kp);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t t = 0; t < k; t += 2) {
        const float* lo = a + r * a_rs + t * a_cs;
        out[r * kp + t / 2] = pair_word(lo, t + 1 < k ? lo + a_cs : nullptr);
      }
    }
    op = {out, kp, 1, op.b, op.ldb};
  }
  (accumulate ? gemm_pairs<true> : gemm_pairs<false>)(m, n, kp, op.a, op.a_rs, op.a_ps, op.b,
                                                      op.ldb, c, ldc, alpha);
}

void dot_rows_bf16(int64_t rows, int64_t n, const float* a, const float* b, float* out) {
  ATTNSCOPE_DCHECK(cpu_has_avx512_bf16() && rows >= 0 && n >= 0);
  constexpr int64_t kDotRows = 8;
  int64_t r = 0;
  for (; r + kDotRows <= rows; r += kDotRows) dot_rows_pairs<kDotRows>(r, n, a, b, out);
  for (; r < rows; ++r) dot_rows_pairs<1>(r, n, a, b, out);
}

}  // namespace attnscope::cpu
