// binary16 <-> fp32 conversion with round-to-nearest-even and IEEE overflow / subnormals.
#include "precision.h"

namespace attnscope {

uint16_t float_to_half_bits(float x) {
  const uint32_t u = float_bits(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf (or is inf)
  if (abs < 0x38800000u) {
    // Result is subnormal or zero: value = mant * 2^-24 after rounding.
    if (abs < 0x33000000u) return sign;  // below half of the smallest subnormal 2^-25
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exp;  // 14..24: moves the implicit bit to 2^-24 units
    const uint32_t kept = mant >> shift;
    const uint32_t rest = mant & ((1u << shift) - 1u);
    const uint32_t half_ulp = 1u << (shift - 1u);
    const uint32_t up = (rest > half_ulp || (rest == half_ulp && (kept & 1u))) ? 1u : 0u;
    return sign | static_cast<uint16_t>(kept + up);
  }
  // Normal: rebias exponent 127 -> 15 and round the 13 dropped mantissa bits to even.
  const uint32_t rebased = abs - 0x38000000u;
  const uint32_t rounded = rebased + 0xfffu + ((rebased >> 13) & 1u);
  return sign | static_cast<uint16_t>(rounded >> 13);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  // Subnormal: normalise the mantissa.
  uint32_t e = 113u;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return bits_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

}  // namespace attnscope
