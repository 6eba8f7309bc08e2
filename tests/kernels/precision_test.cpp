// Exact bit-pattern tests of the fp16 / bf16 conversions in kernels/precision.h.
#include "kernels/precision.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace attnscope {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

TEST(HalfPrecision, max_finite_65504_is_0x7bff) {
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(-65504.0f), 0xfbff);
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);
}

TEST(HalfPrecision, overflow_at_65520_rounds_to_inf) {
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half_bits(1e6f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(kInf), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-kInf), 0xfc00);
  EXPECT_EQ(half_bits_to_float(0x7c00), kInf);
}

TEST(HalfPrecision, just_below_65520_stays_finite) {
  EXPECT_EQ(float_to_half_bits(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(std::nextafter(65520.0f, 0.0f)), 0x7bff);
}

TEST(HalfPrecision, subnormals_round_to_nearest_even) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest half subnormal
  EXPECT_EQ(float_to_half_bits(tiny), 0x0001);
  EXPECT_EQ(half_bits_to_float(0x0001), tiny);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even 0
  EXPECT_EQ(float_to_half_bits(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_half_bits(std::ldexp(3.0f, -25)), 0x0002);  // tie 1.5 ulp -> even 2
  EXPECT_EQ(float_to_half_bits(std::ldexp(5.0f, -25)), 0x0002);  // tie 2.5 ulp -> even 2
  EXPECT_EQ(float_to_half_bits(-std::ldexp(1.0f, -26)), 0x8000);
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14)), 0x0400);     // smallest normal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1023.0f, -24)), 0x03ff);  // largest subnormal
}

TEST(HalfPrecision, nan_stays_nan_and_negative_zero_keeps_sign) {
  const uint16_t nan_bits = float_to_half_bits(kNaN);
  EXPECT_EQ(nan_bits & 0x7c00, 0x7c00);
  EXPECT_NE(nan_bits & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(half_bits_to_float(nan_bits)));
  EXPECT_TRUE(std::isnan(round_to_half(-kNaN)));
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_TRUE(std::signbit(half_bits_to_float(0x8000)));
}

TEST(HalfPrecision, known_normals) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(0.5f), 0x3800);
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie -> even
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie -> even
  EXPECT_EQ(float_to_half_bits(2048.0f + 1.0f), 0x6800);                // 2049 -> 2048
  EXPECT_EQ(half_bits_to_float(0x3555), 0.333251953125f);
}

// Every half value survives half -> float -> half; NaNs stay NaN with their sign.
TEST(HalfPrecision, round_trip_of_all_65536_bit_patterns) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float f = half_bits_to_float(h);
    const bool is_nan = (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0;
    if (is_nan) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << bits;
      const uint16_t back = float_to_half_bits(f);
      ASSERT_EQ(back & 0x8000u, h & 0x8000u) << std::hex << bits;
      ASSERT_EQ(back & 0x7c00u, 0x7c00u) << std::hex << bits;
      ASSERT_NE(back & 0x03ffu, 0u) << std::hex << bits;
    } else {
      ASSERT_EQ(float_to_half_bits(f), h) << std::hex << bits;
    }
  }
}

// The exact midpoint between two adjacent positive halves rounds to the one with an even
// mantissa (the midpoint above 65504 is 65520, which rounds to inf = 0x7c00).
TEST(HalfPrecision, every_midpoint_ties_to_even) {
  for (uint32_t bits = 0; bits < 0x7c00u; ++bits) {
    const double lo = half_bits_to_float(static_cast<uint16_t>(bits));
    const double hi =
        bits + 1 == 0x7c00u ? 65536.0 : half_bits_to_float(static_cast<uint16_t>(bits + 1));
    const float mid = static_cast<float>((lo + hi) / 2);
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const uint16_t even = static_cast<uint16_t>((bits & 1u) ? bits + 1 : bits);
    ASSERT_EQ(float_to_half_bits(mid), even) << std::hex << bits;
    ASSERT_EQ(float_to_half_bits(std::nextafter(mid, 0.0f)), bits) << std::hex << bits;
    ASSERT_EQ(float_to_half_bits(std::nextafter(mid, kInf)), bits + 1) << std::hex << bits;
  }
}

TEST(Bfloat16Precision, ties_round_to_even) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> 1.0
  EXPECT_EQ(float_to_bf16_bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);  // tie -> 1 + 2^-6
  EXPECT_EQ(bf16_bits_to_float(0x3f82), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_EQ(float_to_bf16_bits(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)), 0x3f81);
  EXPECT_EQ(float_to_bf16_bits(-1.0f), 0xbf80);
}

TEST(Bfloat16Precision, overflow_near_3p4e38) {
  EXPECT_EQ(bf16_bits_to_float(0x7f7f), static_cast<float>(finfo_max(Precision::bf16)));
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x7f7f7fffu)), 0x7f7f);  // below the midpoint
  EXPECT_EQ(float_to_bf16_bits(bits_float(0x7f7f8000u)), 0x7f80);  // midpoint, odd -> inf
  EXPECT_EQ(float_to_bf16_bits(3.4e38f), 0x7f80);                  // above the midpoint
  EXPECT_EQ(float_to_bf16_bits(3.39e38f), 0x7f7f);
  EXPECT_EQ(float_to_bf16_bits(-3.4e38f), 0xff80);
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(kInf), 0x7f80);
}

TEST(Bfloat16Precision, nan_stays_nan_and_negative_zero_keeps_sign) {
  EXPECT_TRUE(std::isnan(round_to_bf16(kNaN)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(bits_float(0x7f800001u)))));
  EXPECT_EQ(float_to_bf16_bits(-kNaN) & 0x8000, 0x8000);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
}

TEST(RoundTo, rounds_only_low_precisions) {
  const float x = 1.0f + std::ldexp(1.0f, -12);
  EXPECT_EQ(round_to(Precision::f32, x), x);
  EXPECT_EQ(round_to(Precision::f64, x), x);
  EXPECT_EQ(round_to(Precision::f16, x), 1.0f);
  EXPECT_EQ(round_to(Precision::bf16, x), 1.0f);
  EXPECT_EQ(round_to(Precision::f16, 70000.0f), kInf);
  EXPECT_EQ(round_to(Precision::bf16, 70000.0f), 70144.0f);
}

TEST(MaskFill, fill_values_per_policy_and_precision) {
  EXPECT_EQ(mask_fill_value(MaskFill::neg_1e9, Precision::f16), -1e9);
  EXPECT_EQ(mask_fill_value(MaskFill::finfo_min, Precision::f16), -65504.0);
  EXPECT_EQ(mask_fill_value(MaskFill::finfo_min, Precision::f32),
            -static_cast<double>(std::numeric_limits<float>::max()));
  EXPECT_EQ(mask_fill_value(MaskFill::finfo_min, Precision::bf16), -3.3895313892515355e38);
  EXPECT_EQ(mask_fill_value(MaskFill::neg_inf, Precision::f16),
            -std::numeric_limits<double>::infinity());
  EXPECT_EQ(mask_fill_value(MaskFill::safe, Precision::f64),
            -std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to(Precision::f16,
                     static_cast<float>(mask_fill_value(MaskFill::neg_1e9, Precision::f16))),
            -kInf);
}

TEST(ExpLimit, exp_overflow_arg_is_the_largest_argument_with_finite_exp) {
  // The one value both the CPU and the CUDA instrumentation compare exp arguments with.
  EXPECT_TRUE(std::isfinite(std::exp(kExpOverflowArg)));
  EXPECT_TRUE(std::isinf(std::exp(std::nextafter(kExpOverflowArg, 100.0f))));
}

}  // namespace
}  // namespace attnscope
