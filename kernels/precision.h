// IEEE binary16 and bfloat16 conversions (round-to-nearest-even, overflow to +-inf like the
// hardware), rounding of fp32 values to an emulated precision, and the fp32 exp limit the CPU
// and CUDA instrumentation share.
#pragma once

#include <cstdint>
#include <cstring>

#include "attn_params.h"

namespace attnscope {

// Largest fp32 exp argument whose exp is finite: log(FLT_MAX) = 88.7228391... rounded down to
// fp32. An exp argument above it overflows to +inf (kernels/cpu/trace_recorder, CUDA forward).
constexpr float kExpOverflowArg = 88.72283f;

inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// bfloat16 is the top half of an fp32; NaN stays a quiet NaN with its sign.
inline uint16_t float_to_bf16_bits(float x) {
  const uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

inline float bf16_bits_to_float(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; max finite 65504.
uint16_t float_to_half_bits(float x);
float half_bits_to_float(uint16_t h);

inline float round_to_half(float x) {
  return half_bits_to_float(float_to_half_bits(x));
}
inline float round_to_bf16(float x) {
  return bf16_bits_to_float(float_to_bf16_bits(x));
}

// The magnitude bits of an fp32 (its bits with the sign cleared) and FLT_MAX's: x is finite iff
// (float_bits(x) & kMagnitudeMask) <= kMaxFiniteBits.
constexpr uint32_t kMagnitudeMask = 0x7fffffffu, kMaxFiniteBits = 0x7f7fffffu;

// True when round_to changes some fp32 values: the precision is narrower than fp32.
inline bool rounds(Precision p) {
  return p == Precision::f16 || p == Precision::bf16;
}

// Rounds an fp32 value to the precision and back (identity for f32 and f64).
inline float round_to(Precision p, float x) {
  switch (p) {
    case Precision::f16:
      return round_to_half(x);
    case Precision::bf16:
      return round_to_bf16(x);
    case Precision::f32:
    case Precision::f64:
      break;
  }
  return x;
}

}  // namespace attnscope
