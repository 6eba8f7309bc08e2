// The CPU kernels' building blocks: vectorised rounding bit-identical to kernels/precision.h,
// exp within 2 ulp with IEEE special cases, NaN-propagating row max, the tile matmul against
// a naive loop on odd shapes and strides, bit-exact transposes, and the finite-value scans of
// the instrumentation.
#include "kernels/cpu/tile_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/attn_names.h"
#include "kernels/precision.h"

namespace attnscope::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

TEST(TileMath, round_copy_matches_round_to_bit_for_bit_f16_bf16) {
  std::mt19937 gen(7);
  std::vector<float> src(1 << 20);
  for (float& x : src) {
    const uint32_t u = static_cast<uint32_t>(gen());
    std::memcpy(&x, &u, sizeof x);
  }
  const float specials[] = {0.0f,      -0.0f,    kInf,     -kInf,  kNaN,       65504.0f, 65520.0f,
                            65519.99f, 5.96e-8f, 2.98e-8f, 1e-45f, 3.3895e38f, 3.4e38f,  -1e9f};
  std::copy(std::begin(specials), std::end(specials), src.begin());
  for (Precision p : {Precision::f16, Precision::bf16}) {
    std::vector<float> dst(src.size() + 3);
    round_copy(p, src.data(), dst.data(), static_cast<int64_t>(src.size()) - 3);  // odd tail
    int64_t mismatches = 0;
    for (size_t i = 0; i + 3 < src.size(); ++i)
      mismatches += bits(dst[i]) != bits(round_to(p, src[i]));
    EXPECT_EQ(mismatches, 0) << (p == Precision::f16 ? "f16" : "bf16");
  }
}

// The stages that round while they compute (P in the online softmax, dS in the softmax
// gradient, round_rows) store round_to of what they store at f32, on rows with a vector tail
// and a row stride past the row; the online softmax's l sums the unrounded P in
// exp_shifted_sum's order.
TEST(TileMath, rounding_row_stages_store_round_to_of_their_f32_values_f16_bf16) {
  constexpr int64_t kRows = 5, kCols = 61, kLd = 64;
  std::mt19937 gen(11);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> s(kRows * kLd), dp(s.size()), gf(s.size(), 1.0f), d(kRows);
  for (float& x : s) x = normal(gen);
  for (float& x : dp) x = normal(gen);
  for (float& x : d) x = normal(gen);
  s[3] = kNaN;               // row 0 is NaN throughout
  dp[kLd + 60] = kInf;       // row 1's tail
  dp[2 * kLd + 7] = 1e-38f;  // a subnormal product in row 2
  gf[2 * kLd + 7] = 1e-3f;
  const auto run = [&](Precision precision, std::vector<float>& p, std::vector<float>& l,
                       std::vector<float>& ds, std::vector<float>& copy) {
    std::vector<float> m(kRows, -kInf), acc;
    p.assign(s.size(), 0.0f);
    l.assign(kRows, 0.0f);
    online_softmax_rows(kRows, kCols, kLd, s.data(), p.data(), m.data(), l.data(), acc.data(), 0,
                        precision);
    ds.assign(s.size(), 0.0f);
    softmax_grad_rows(kRows, kCols, kLd, s.data(), dp.data(), d.data(), gf.data(), precision,
                      ds.data());
    copy.assign(s.size(), 0.0f);
    round_rows(precision, kRows, kCols, kLd, dp.data(), copy.data());
  };
  std::vector<float> p32, l32, ds32, copy32;
  run(Precision::f32, p32, l32, ds32, copy32);
  for (Precision pr : {Precision::f16, Precision::bf16}) {
    std::vector<float> p, l, ds, copy;
    run(pr, p, l, ds, copy);
    int64_t mismatches = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      mismatches += bits(l[r]) != bits(l32[r]);
      for (int64_t c = 0; c < kLd; ++c) {
        const int64_t i = r * kLd + c;
        const bool in_row = c < kCols;
        mismatches += bits(p[i]) != bits(in_row ? round_to(pr, p32[i]) : 0.0f);
        mismatches += bits(ds[i]) != bits(in_row ? round_to(pr, ds32[i]) : 0.0f);
        mismatches += bits(copy[i]) != bits(in_row ? round_to(pr, dp[i]) : 0.0f);
      }
    }
    EXPECT_EQ(mismatches, 0) << (pr == Precision::f16 ? "f16" : "bf16");
  }
  // One tile from m = -inf: l is the row's exp sum exactly as exp_shifted_sum sums it.
  for (int64_t r = 1; r < kRows; ++r) {
    std::vector<float> tmp(kCols);
    const float* s_r = s.data() + r * kLd;
    const float base = max_propagating_nan(s_r, kCols);
    EXPECT_EQ(bits(l32[r]), bits(exp_shifted_sum(s_r, base, tmp.data(), kCols))) << "row " << r;
    for (int64_t c = 0; c < kCols; ++c) ASSERT_EQ(bits(p32[r * kLd + c]), bits(tmp[c]));
  }
  EXPECT_TRUE(std::isnan(l32[0]));
  EXPECT_NE(bits(copy32[kLd + 60]), bits(0.0f));  // f32: a plain copy
}

// softmax_grad_rows returns the largest stored |dS| while every dP and dS is finite, +inf on a
// NaN or inf in dP (a vector lane or the tail) or a dS that overflows only once rounded to fp16.
TEST(TileMath, softmax_grad_rows_returns_max_ds_or_inf_for_non_finite_dp_and_stored_ds) {
  constexpr int64_t kCols = 37;  // two AVX-512 registers and a tail
  std::vector<float> p(kCols, 0.5f), dp(kCols, 2.0f), gf(kCols, 1.0f), ds(kCols);
  const float d = 1.0f;
  const auto grad = [&](const std::vector<float>& dp_in, Precision pr) {
    return softmax_grad_rows(1, kCols, kCols, p.data(), dp_in.data(), &d, gf.data(), pr, ds.data());
  };
  for (Precision pr : {Precision::f32, Precision::f16, Precision::bf16}) {
    EXPECT_EQ(grad(dp, pr), 0.5f);  // 0.5 * (2 - 1)
    for (int64_t at : {3, 35}) {
      std::vector<float> dp_neg = dp;
      dp_neg[at] = -7.0f;  // dS = -4: the largest magnitude, in a lane or the tail
      EXPECT_EQ(grad(dp_neg, pr), 4.0f);
      std::vector<float> dp_bad = dp;
      dp_bad[at] = kNaN;
      EXPECT_EQ(grad(dp_bad, pr), kInf);
      dp_bad[at] = -kInf;
      EXPECT_EQ(grad(dp_bad, pr), kInf);
    }
  }
  for (int64_t at : {5, 36}) {
    std::vector<float> dp_big = dp;
    dp_big[at] = 2e5f;  // dS = 0.5 * (2e5 - 1): finite in fp32 and bf16, inf in fp16
    EXPECT_EQ(grad(dp_big, Precision::f32), 99999.5f);
    EXPECT_EQ(grad(dp_big, Precision::bf16), round_to(Precision::bf16, 99999.5f));
    EXPECT_EQ(grad(dp_big, Precision::f16), kInf);
    EXPECT_TRUE(std::isinf(ds[static_cast<size_t>(at)]));
  }
}

// sum_squares in its stated order (x mod 8 lanes, lanes in order, then the tail), bit for bit:
// magnitudes spread over 2^-40..2^40, so another order would round differently.
TEST(TileMath, sum_squares_sums_in_eight_lanes_then_the_tail_bit_for_bit) {
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-40, 40);
  for (int64_t n : {0, 1, 7, 8, 15, 64, 67, 1000}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = std::ldexp(mantissa(gen), exponent(gen)) * (gen() % 2 ? 1 : -1);
    double lanes[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      for (int64_t l = 0; l < 8; ++l) {
        lanes[l] +=
            static_cast<double>(x[static_cast<size_t>(i + l)]) * x[static_cast<size_t>(i + l)];
      }
    }
    double want = 0;
    for (double lane : lanes) want += lane;
    for (; i < n; ++i)
      want += static_cast<double>(x[static_cast<size_t>(i)]) * x[static_cast<size_t>(i)];
    const double got = sum_squares(x.data(), n);
    EXPECT_EQ(std::memcmp(&got, &want, sizeof(double)), 0)
        << "n = " << n << ": " << got << " vs " << want;
  }
}

// The exp pass with block maxima stores exactly exp_shifted_scaled_rows's P and reports exactly
// finite_block_max's maxima against the same bases (false once an entry is NaN or inf).
TEST(TileMath, exp_rows_with_maxima_match_exp_rows_and_finite_block_max_bit_for_bit) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-30.0f, 30.0f);
  for (int64_t cols : {1, 9, 16, 42, 64}) {
    constexpr int64_t kRows = 5, kLd = 64;
    std::vector<float> s(kRows * kLd), base(kRows), factor(kRows), p1(s.size()), p2(s.size());
    for (float& v : s) v = u(gen);
    for (float& v : base) v = u(gen);
    for (float& v : factor) v = 1.0f / (1.0f + std::abs(u(gen)));
    float want_arg = 0, want_abs = 0, got_arg = 0, got_abs = 0;
    ASSERT_TRUE(finite_block_max(s.data(), kRows, cols, kLd, base.data(), &want_arg, &want_abs));
    exp_shifted_scaled_rows(kRows, cols, kLd, s.data(), base.data(), factor.data(), p1.data());
    ASSERT_TRUE(exp_shifted_scaled_rows_max(kRows, cols, kLd, s.data(), base.data(), factor.data(),
                                            p2.data(), &got_arg, &got_abs));
    EXPECT_EQ(bits(got_arg), bits(want_arg)) << cols;
    EXPECT_EQ(bits(got_abs), bits(want_abs)) << cols;
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(bits(p1[r * kLd + c]), bits(p2[r * kLd + c]));
    }
    s[3 * kLd + cols - 1] = kInf;
    EXPECT_FALSE(exp_shifted_scaled_rows_max(kRows, cols, kLd, s.data(), base.data(), factor.data(),
                                             p2.data(), &got_arg, &got_abs));
  }
}

// transpose and transpose_words copy every element's bits (NaN payloads included) to its
// transposed place on shapes around the 4 x 4 blocks, and leave dst's padding alone.
TEST(TileMath, transposes_move_every_elements_bits_and_keep_the_padding) {
  for (const int64_t rows : {0, 1, 3, 4, 5, 8, 17, 64}) {
    for (const int64_t cols : {0, 1, 3, 4, 7, 12, 64}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
      const int64_t ld_src = cols + 3, ld_dst = rows + 2;
      std::vector<uint32_t> src(static_cast<size_t>(rows * ld_src));
      for (size_t e = 0; e < src.size(); ++e) {
        src[e] = static_cast<uint32_t>(e * 2654435761u) | 0x7f800001u;  // NaN bits, no two alike
      }
      std::vector<float> src_f(src.size());
      for (size_t e = 0; e < src.size(); ++e) std::memcpy(&src_f[e], &src[e], sizeof(float));
      constexpr uint32_t kPad = 0x5a5a5a5au;
      std::vector<uint32_t> dst(static_cast<size_t>(cols * ld_dst + 1), kPad);
      float pad_f;
      std::memcpy(&pad_f, &kPad, sizeof pad_f);
      std::vector<float> dst_f(dst.size(), pad_f);
      transpose_words(rows, cols, src.data(), ld_src, dst.data(), ld_dst);
      transpose(rows, cols, src_f.data(), ld_src, dst_f.data(), ld_dst);
      for (int64_t x = 0; x < cols; ++x) {
        for (int64_t r = 0; r < ld_dst; ++r) {
          const size_t at = static_cast<size_t>(x * ld_dst + r);
          const uint32_t want = r < rows ? src[static_cast<size_t>(r * ld_src + x)] : kPad;
          ASSERT_EQ(dst[at], want) << "words (" << x << ", " << r << ")";
          ASSERT_EQ(bits(dst_f[at]), want) << "floats (" << x << ", " << r << ")";
        }
      }
      ASSERT_EQ(dst.back(), kPad);
    }
  }
}

// fill_rows writes the value into every row's first cols entries and leaves the rest alone.
TEST(TileMath, fill_rows_fills_cols_of_each_row_and_keeps_the_padding) {
  for (int64_t cols : {1, 15, 16, 17, 64}) {
    constexpr int64_t kRows = 3, kLd = 70;
    std::vector<float> x(kRows * kLd, -2.0f);
    fill_rows(kRows, cols, kLd, 1.0f, x.data());
    for (int64_t e = 0; e < kRows * kLd; ++e) {
      ASSERT_EQ(x[static_cast<size_t>(e)], e % kLd < cols ? 1.0f : -2.0f) << cols << " " << e;
    }
  }
}

// row_maxima: each row's largest_magnitude, bit for bit (NaN and inf rows too), and true on
// values of the precision (lanes and tail), false once one entry would round, including an fp16
// overflow to inf; always true at fp32.
TEST(TileMath, row_maxima_give_each_rows_largest_magnitude_and_whether_all_round_to_themselves) {
  for (Precision pr : {Precision::f16, Precision::bf16}) {
    for (int64_t dim : {5, 16, 37}) {
      const int64_t rows = 4, n = rows * dim;
      std::vector<float> x(static_cast<size_t>(n)), row_max(static_cast<size_t>(rows));
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = round_to(pr, 0.1f * (i - 7));
      x[static_cast<size_t>(dim + 2)] = kNaN;       // row 1
      x[static_cast<size_t>(2 * dim + 1)] = -kInf;  // row 2
      EXPECT_TRUE(row_maxima(pr, x.data(), rows, dim, row_max.data()));
      for (int64_t r = 0; r < rows; ++r) {
        const float expected = largest_magnitude(x.data() + r * dim, dim);
        EXPECT_EQ(float_bits(row_max[static_cast<size_t>(r)]), float_bits(expected))
            << precision_name(pr) << " dim " << dim << " row " << r;
      }
      EXPECT_TRUE(std::isnan(row_max[1]));
      EXPECT_EQ(row_max[2], kInf);
      for (int64_t at : {int64_t{0}, n - 1}) {
        std::vector<float> y = x;
        y[static_cast<size_t>(at)] = 1.0f + 1.0f / 1024 + 1.0f / 4096;  // in neither precision
        EXPECT_FALSE(row_maxima(pr, y.data(), rows, dim, row_max.data()))
            << precision_name(pr) << dim << " " << at;
        EXPECT_TRUE(row_maxima(Precision::f32, y.data(), rows, dim, row_max.data()));
      }
    }
  }
  const float big = 69632.0f;  // 1.0625 * 2^16: an fp16 inf, a bf16 value
  float big_max = 0;
  EXPECT_FALSE(row_maxima(Precision::f16, &big, 1, 1, &big_max));
  EXPECT_TRUE(row_maxima(Precision::bf16, &big, 1, 1, &big_max));
  EXPECT_EQ(big_max, big);
}

TEST(TileMath, exp_within_2_ulp_and_ieee_special_cases) {
  double worst = 0;
  for (float x = -86.4f; x < 88.7f; x += 0.0137f) {
    const double ref = std::exp(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(ref) - 23);
    worst = std::max(worst, std::abs(exp_f32(x) - ref) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-kInf), 0.0f);
  EXPECT_EQ(exp_f32(kInf), kInf);
  EXPECT_EQ(exp_f32(89.0f), kInf);
  EXPECT_TRUE(std::isfinite(exp_f32(88.72f)));
  EXPECT_TRUE(std::isnan(exp_f32(kNaN)));
  EXPECT_EQ(exp_f32(-1e9f), 0.0f);
}

TEST(TileMath, exp_shifted_sum_of_minus_inf_minus_minus_inf_is_nan) {
  const float s[3] = {-kInf, -kInf, -kInf};
  float p[3];
  EXPECT_TRUE(std::isnan(exp_shifted_sum(s, -kInf, p, 3)));
  EXPECT_EQ(exp_shifted_sum(s, 0.0f, p, 3), 0.0f);
}

TEST(TileMath, row_max_propagates_nan_and_is_minus_inf_when_empty) {
  std::vector<float> x(19, 1.0f);
  x[11] = 5.0f;
  EXPECT_EQ(max_propagating_nan(x.data(), 19), 5.0f);
  x[17] = kNaN;  // in the scalar tail
  EXPECT_TRUE(std::isnan(max_propagating_nan(x.data(), 19)));
  x[17] = 1.0f;
  x[2] = kNaN;  // in a vector lane
  EXPECT_TRUE(std::isnan(max_propagating_nan(x.data(), 19)));
  EXPECT_EQ(max_propagating_nan(x.data(), 0), -kInf);
  EXPECT_TRUE(std::isnan(max_propagating_nan(kNaN, 1.0f)));
  EXPECT_TRUE(std::isnan(max_propagating_nan(1.0f, kNaN)));
}

// dot_rows_f32_in_order: each row's dot product has the bits of one element of gemm_tile (alpha
// 1, C = 0), for any length and row count (groups of 8 rows and a tail).
TEST(TileMath, dot_rows_f32_in_order_are_elements_of_gemm_tile_bit_for_bit) {
  std::mt19937 gen(8);
  std::normal_distribution<float> u(0, 3);
  for (int64_t k : {1, 5, 64, 131}) {
    const int64_t m = 7, n = 19;
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (float& e : a) e = u(gen);
    for (float& e : b) e = u(gen);
    std::vector<float> c(static_cast<size_t>(m * n));
    gemm_tile(m, n, k, a.data(), k, 1, b.data(), n, c.data(), n, 1.0f, false);
    const test::DotRows rows = test::dot_rows_of(a, b, m, n, k);
    std::vector<float> d(static_cast<size_t>(m * n));
    dot_rows_f32_in_order(m * n, k, rows.a_rows.data(), rows.b_cols.data(), d.data());
    for (int64_t e = 0; e < m * n; ++e) {
      ASSERT_EQ(float_bits(d[static_cast<size_t>(e)]), float_bits(c[static_cast<size_t>(e)]))
          << "k " << k << " at " << e / n << "," << e % n;
    }
  }
}

TEST(TileMath, gemm_tile_matches_naive_on_odd_shapes_strides_alpha_accumulate) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const auto& [m, n, k] : {std::array<int64_t, 3>{1, 1, 1},
                                {7, 13, 5},
                                {64, 59, 111},
                                {13, 64, 64},
                                {6, 16, 3},
                                {5, 23, 17}}) {
    for (const bool transposed_a : {false, true}) {
      std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * (n + 3)));
      std::vector<float> c(static_cast<size_t>(m * (n + 2)));
      for (float& e : a) e = u(gen);
      for (float& e : b) e = u(gen);
      for (float& e : c) e = u(gen);
      const std::vector<float> c0 = c;
      const int64_t a_rs = transposed_a ? 1 : k, a_cs = transposed_a ? m : 1;
      gemm_tile(m, n, k, a.data(), a_rs, a_cs, b.data(), n + 3, c.data(), n + 2, 0.5f, true);
      double worst = 0;
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t x = 0; x < n; ++x) {
          double ref = 0;
          for (int64_t t = 0; t < k; ++t)
            ref += double{a[r * a_rs + t * a_cs]} * b[t * (n + 3) + x];
          ref = c0[r * (n + 2) + x] + 0.5 * ref;
          worst = std::max(worst, std::abs(ref - c[r * (n + 2) + x]));
        }
      }
      EXPECT_LE(worst, 1e-5) << m << "x" << n << "x" << k;
    }
  }
}

TEST(TileMath, nonfinite_counts_largest_magnitude_and_maxima_against_scalar_loops_odd_sizes) {
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> u(-1e30f, 1e30f);
  const float specials[] = {kNaN, kInf, -kInf, 3.4e38f, -3.4e38f};
  for (int64_t rows : {1, 3}) {
    for (int64_t cols : {1, 7, 8, 9, 64, 67}) {
      const int64_t ld = cols + 5;
      std::vector<float> x(static_cast<size_t>(rows * ld)), shift(static_cast<size_t>(rows));
      for (float& v : x) v = u(gen);
      for (float& v : shift) v = u(gen);
      float want_abs = 0, want_arg = -kInf;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const float v = x[static_cast<size_t>(r * ld + c)];
          want_abs = std::max(want_abs, std::abs(v));
          want_arg = std::max(want_arg, v - shift[static_cast<size_t>(r)]);
        }
      }
      float got_abs = 0, got_arg = 0;
      ASSERT_TRUE(finite_block_max(x.data(), rows, cols, ld, shift.data(), &got_arg, &got_abs));
      EXPECT_EQ(got_abs, want_abs) << rows << "x" << cols;
      EXPECT_EQ(got_arg, want_arg) << rows << "x" << cols;

      x[static_cast<size_t>((rows - 1) * ld + cols / 2)] = specials[gen() % 3];
      EXPECT_FALSE(finite_block_max(x.data(), rows, cols, ld, shift.data(), &got_arg, &got_abs));
      for (float& v : x) v = gen() % 9 == 0 ? specials[gen() % 5] : v;
      const float* row = x.data() + (rows - 1) * ld;
      int64_t want_bad = 0;
      float want_max = -kInf;
      want_abs = 0;
      for (int64_t c = 0; c < cols; ++c) {
        if (!std::isfinite(row[c])) {
          ++want_bad;
          continue;
        }
        want_abs = std::max(want_abs, std::abs(row[c]));
        want_max = std::max(want_max, row[c]);
      }
      float got_max = 0;
      EXPECT_EQ(count_nonfinite(row, cols), want_bad);
      EXPECT_EQ(all_finite(row, cols), want_bad == 0);
      // The largest magnitude: NaN above inf above every finite value.
      const bool has_nan = std::any_of(row, row + cols, [](float v) { return std::isnan(v); });
      const float largest = largest_magnitude(row, cols);
      if (has_nan) {
        EXPECT_TRUE(std::isnan(largest));
      } else {
        EXPECT_EQ(largest, want_bad > 0 ? kInf : want_abs);
      }
      EXPECT_EQ(largest_magnitude(row, 0), 0.0f);
      EXPECT_EQ(finite_max(row, cols, &got_abs, &got_max), want_bad);
      EXPECT_EQ(got_abs, want_abs);
      EXPECT_EQ(got_max, want_max);
    }
  }
}

}  // namespace
}  // namespace attnscope::cpu
