// Per-element math of the CUDA attention kernels as __host__ __device__ inline functions, so
// that g++ compiles the very same code into CPU unit tests (tests/gpu/device_math_test.cpp):
// fp16 / bf16 rounding, masking, causal alignment, softcap, the online-softmax update of one
// row and non-finite classification (the provenance of a row: row_provenance in
// kernels/attn_types.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/attn_params.h"
#include "kernels/attn_types.h"  // ATTNSCOPE_HD, kTileRows / kTileCols, RowCause, Provenance
#include "kernels/precision.h"   // kExpOverflowArg, the CPU kernels' value

namespace attnscope::cuda {

ATTNSCOPE_HD uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

ATTNSCOPE_HD float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

ATTNSCOPE_HD float pos_inf() {
  return float_of(0x7f800000u);
}

ATTNSCOPE_HD float quiet_nan() {
  return float_of(0x7fc00000u);
}

// Finite: neither NaN nor +-inf (exponent bits not all ones).
ATTNSCOPE_HD bool is_finite(float x) {
  return (bits_of(x) & 0x7f800000u) != 0x7f800000u;
}

ATTNSCOPE_HD bool is_nan(float x) {
  return (bits_of(x) & 0x7fffffffu) > 0x7f800000u;
}

// bfloat16 bits of x, round-to-nearest-even; NaN stays a quiet NaN with its sign.
ATTNSCOPE_HD uint16_t to_bf16_bits(float x) {
  const uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

ATTNSCOPE_HD float from_bf16_bits(uint16_t h) {
  return float_of(static_cast<uint32_t>(h) << 16);
}

// IEEE binary16 bits of x, round-to-nearest-even, overflow to +-inf, subnormals kept.
ATTNSCOPE_HD uint16_t to_half_bits(float x) {
  const uint32_t u = bits_of(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (a < 0x38800000u) {                        // subnormal or zero: units of 2^-24
    if (a < 0x33000000u) return sign;
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - (a >> 23);
    const uint32_t kept = mant >> shift, rest = mant & ((1u << shift) - 1u);
    const uint32_t half_ulp = 1u << (shift - 1u);
    const uint32_t up = (rest > half_ulp || (rest == half_ulp && (kept & 1u))) ? 1u : 0u;
    return sign | static_cast<uint16_t>(kept + up);
  }
  const uint32_t rebased = a - 0x38000000u;
  return sign | static_cast<uint16_t>((rebased + 0xfffu + ((rebased >> 13) & 1u)) >> 13);
}

ATTNSCOPE_HD float from_half_bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (e == 0x1fu) return float_of(sign | 0x7f800000u | (mant << 13));
  if (e != 0) return float_of(sign | ((e + 112u) << 23) | (mant << 13));
  if (mant == 0) return float_of(sign);
  uint32_t ex = 113u;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --ex;
  }
  return float_of(sign | (ex << 23) | ((mant & 0x3ffu) << 13));
}

// x rounded to the precision and back to fp32 (identity for f32 / f64).
ATTNSCOPE_HD float round_to_precision(Precision p, float x) {
  if (p == Precision::f16) return from_half_bits(to_half_bits(x));
  if (p == Precision::bf16) return from_bf16_bits(to_bf16_bits(x));
  return x;
}

// max(a, b) that returns NaN when either is NaN (torch.max semantics).
ATTNSCOPE_HD float max_nan(float a, float b) {
  return (b > a || is_nan(b)) && !is_nan(a) ? b : a;
}

// Rows (or keys) of the tile that starts at `start` in a sequence of n: min(tile, n - start).
ATTNSCOPE_HD int tile_extent(int64_t n, int64_t start, int tile) {
  return n - start < tile ? static_cast<int>(n - start) : tile;
}

// Pooled cell of offset x in a window of `size` entries cut into n cells with edges
// floor(e * size / n) (PooledHeadMatrices): the largest e with edge(e) <= x.
ATTNSCOPE_HD int64_t pooled_cell(int64_t x, int64_t size, int64_t n) {
  return ((x + 1) * n + size - 1) / size - 1;
}

// Key offset of the causal diagonal: key j is hidden from query i iff j > i + shift.
ATTNSCOPE_HD int64_t causal_shift(bool bottom_right, int64_t seqlen_q, int64_t seqlen_k) {
  return bottom_right ? seqlen_k - seqlen_q : 0;
}

// True when causality hides every key of the tile [i0, i0 + rows) x [j0, ...).
ATTNSCOPE_HD bool tile_causally_hidden(bool causal, int64_t shift, int64_t i0, int64_t rows,
                                       int64_t j0) {
  return causal && j0 > i0 + rows - 1 + shift;
}

// Element offset of (b, h, i, j) in a broadcast [B, H, Sq, Sk] operand.
ATTNSCOPE_HD int64_t broadcast_offset(const BroadcastStrides& st, int64_t b, int64_t h, int64_t i,
                                      int64_t j) {
  return b * st.b + h * st.h + i * st.q + j * st.k;
}

// The score after softcap: cap * tanh(s / cap) when cap > 0; *gf = d out / d s.
ATTNSCOPE_HD float apply_softcap(float s, float cap, float tanh_of_ratio, float* gf) {
  if (cap <= 0) {
    *gf = 1.0f;
    return s;
  }
  *gf = 1.0f - tanh_of_ratio * tanh_of_ratio;
  return cap * tanh_of_ratio;
}

// The exponent base of a row whose running max is m_new: a row with nothing visible yet
// (m_new = -inf) uses 0, so exp(-inf - 0) = 0 and alpha = exp(-inf) = 0 instead of NaN.
ATTNSCOPE_HD float softmax_base(float m_new) {
  return m_new == -pos_inf() ? 0.0f : m_new;
}

// Class of a value as a CellClass code: 0 finite, 1 NaN, 2 +inf, 3 -inf.
ATTNSCOPE_HD int nonfinite_class(float x) {
  if (is_finite(x)) return 0;
  if (is_nan(x)) return 1;
  return x > 0 ? 2 : 3;
}

}  // namespace attnscope::cuda
