// The AVX512-BF16 tile matmul (kernels/cpu/gemm_bf16.h) against fp64 sums on odd shapes, the
// three A layouts (rows contiguous, transposed, any strides), alpha and accumulate; exact on
// integer operands (so every product meets its partner); dot_rows_bf16 equal bit for bit to each
// element of a matmul; the pairings' layouts; NaN and inf propagation. Skipped on CPUs without
// AVX512-BF16.
#include "kernels/cpu/gemm_bf16.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/precision.h"

namespace attnscope::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A(r, t) = a[r * a_rs + t * a_cs] of an [m x k] A in each layout gemm_tile_bf16 takes.
struct Layout {
  const char* name;
  int64_t a_rs, a_cs;  // strides for m, k
};

std::vector<Layout> layouts(int64_t m, int64_t k) {
  return {{"rows", k, 1}, {"transposed", 1, m}, {"strided", 2, 2 * m}};
}

class GemmBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu_has_avx512_bf16()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  }
};

const std::array<int64_t, 3> kShapes[] = {{1, 1, 1},  {7, 13, 5},  {64, 59, 111}, {13, 64, 64},
                                          {6, 16, 3}, {5, 23, 17}, {64, 64, 64},  {3, 70, 0}};

TEST_F(GemmBf16, matches_fp64_sums_on_odd_shapes_every_layout_alpha_accumulate) {
  std::mt19937 gen(3);
  std::normal_distribution<float> u(0, 1);
  for (const auto& [m, n, k] : kShapes) {
    for (const Layout& lay : layouts(m, k)) {
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " " +
                     lay.name + (accumulate ? " accumulate" : ""));
        const int64_t ldb = n + 3, ldc = n + 2;
        std::vector<float> a(static_cast<size_t>(2 * m * k + 1)), b(static_cast<size_t>(k * ldb));
        std::vector<float> c(static_cast<size_t>(m * ldc));
        for (float& e : a) e = round_to(Precision::bf16, u(gen));
        for (float& e : b) e = round_to(Precision::bf16, u(gen));
        for (float& e : c) e = u(gen);
        const std::vector<float> c0 = c;
        gemm_tile_bf16(m, n, k, a.data(), lay.a_rs, lay.a_cs, b.data(), ldb, c.data(), ldc, 0.5f,
                       accumulate);
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t x = 0; x < ldc; ++x) {
            const size_t at = static_cast<size_t>(r * ldc + x);
            if (x >= n) {  // past the n columns: untouched
              ASSERT_EQ(float_bits(c[at]), float_bits(c0[at])) << r << "," << x;
              continue;
            }
            double ref = 0, size = std::abs(accumulate ? c0[at] : 0.0f);
            for (int64_t t = 0; t < k; ++t) {
              const double p = double{a[r * lay.a_rs + t * lay.a_cs]} * b[t * ldb + x];
              ref += p;
              size += 0.5 * std::abs(p);
            }
            ref = (accumulate ? c0[at] : 0.0) + 0.5 * ref;
            // k fp32 roundings of partial sums, one of alpha, one of the FMA into C.
            ASSERT_LE(std::abs(ref - c[at]), (k + 2) * 0x1p-24 * size) << r << "," << x;
          }
        }
      }
    }
  }
}

TEST_F(GemmBf16, exact_on_integers_so_every_product_meets_its_partner) {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> u(-8, 8);
  for (const auto& [m, n, k] : kShapes) {
    for (const Layout& lay : layouts(m, k)) {
      std::vector<float> a(static_cast<size_t>(2 * m * k + 1)), b(static_cast<size_t>(k * n));
      for (float& e : a) e = static_cast<float>(u(gen));
      for (float& e : b) e = static_cast<float>(u(gen));
      std::vector<float> c(static_cast<size_t>(m * n), kNaN);
      gemm_tile_bf16(m, n, k, a.data(), lay.a_rs, lay.a_cs, b.data(), n, c.data(), n, 1.0f, false);
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t x = 0; x < n; ++x) {
          float ref = 0;
          for (int64_t t = 0; t < k; ++t) ref += a[r * lay.a_rs + t * lay.a_cs] * b[t * n + x];
          ASSERT_EQ(c[r * n + x], ref)
              << m << "x" << n << "x" << k << " " << lay.name << " at " << r << "," << x;
        }
      }
    }
  }
}

TEST_F(GemmBf16, dot_rows_bf16_are_elements_of_the_matmul_bit_for_bit) {
  // D_i = dO_i . O_i must equal dP_ij = dO_i . V_j wherever O_i = V_j: the dot sums as the
  // matmul does, for any length (odd ones pad the last pair).
  std::mt19937 gen(9);
  std::normal_distribution<float> u(0, 3);
  for (int64_t k : {1, 2, 5, 59, 64, 128}) {
    const int64_t m = 7, n = 19;
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (float& e : a) e = round_to(Precision::bf16, u(gen));
    for (float& e : b) e = round_to(Precision::bf16, u(gen));
    std::vector<float> c(static_cast<size_t>(m * n));
    gemm_tile_bf16(m, n, k, a.data(), k, 1, b.data(), n, c.data(), n, 1.0f, false);
    // Row (r, x) of the dot products: row r of A against column x of B (7 * 19 rows: whole
    // groups of 8 and a tail).
    const test::DotRows rows = test::dot_rows_of(a, b, m, n, k);
    std::vector<float> d(static_cast<size_t>(m * n));
    dot_rows_bf16(m * n, k, rows.a_rows.data(), rows.b_cols.data(), d.data());
    for (int64_t e = 0; e < m * n; ++e) {
      ASSERT_EQ(float_bits(d[static_cast<size_t>(e)]), float_bits(c[static_cast<size_t>(e)]))
          << "k " << k << " at " << e / n << "," << e % n;
    }
  }
  dot_rows_bf16(0, 0, nullptr, nullptr, nullptr);
}

// pair_rows_transposed of X is pair_columns of X^T word for word (NaN bits and an odd k's
// padded last pair included), zero from column n up to ldo.
TEST_F(GemmBf16, pair_rows_transposed_pairs_the_columns_of_the_transpose) {
  std::mt19937 gen(12);
  std::normal_distribution<float> u(0, 2);
  for (const int64_t n : {1, 5, 16, 17, 64}) {
    for (const int64_t k : {1, 2, 13, 64, 128}) {
      SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(k));
      const int64_t ldx = k + 1, ldo = 64, kp = (k + 1) / 2;
      std::vector<float> x(static_cast<size_t>(n * ldx)), xt(static_cast<size_t>(k * n));
      for (float& e : x) e = round_to(Precision::bf16, u(gen));
      x[static_cast<size_t>(ldx * (n - 1))] = kNaN;
      for (int64_t c = 0; c < n; ++c) {
        for (int64_t t = 0; t < k; ++t) {
          xt[static_cast<size_t>(t * n + c)] = x[static_cast<size_t>(c * ldx + t)];
        }
      }
      std::vector<uint32_t> want(static_cast<size_t>(kp * paired_ld(n)));
      pair_columns(k, n, xt.data(), n, want.data());
      std::vector<uint32_t> got(static_cast<size_t>(kp * ldo), 0xdeadbeefu);
      pair_rows_transposed(n, k, x.data(), ldx, ldo, got.data());
      for (int64_t p = 0; p < kp; ++p) {
        for (int64_t c = 0; c < ldo; ++c) {
          const uint32_t w = c < n ? want[static_cast<size_t>(p * paired_ld(n) + c)] : 0u;
          ASSERT_EQ(got[static_cast<size_t>(p * ldo + c)], w) << "pair " << p << " column " << c;
        }
      }
    }
  }
}

// a_rounds: an fp32 A (transposed, or rows contiguous) paired with rounding gives the bits of the
// same matmul on round_to(bf16, A), odd shapes, values halfway between bf16 neighbours, NaN, inf,
// overflow to inf and denormals (read as 0 by vdpbf16ps either way) included.
TEST_F(GemmBf16, a_rounds_pairs_fp32_a_as_its_bf16_rounding) {
  std::mt19937 gen(5);
  std::normal_distribution<float> u(0, 1);
  const float specials[] = {kNaN,     kInf,   -kInf,         1.0f + 0x1p-8f, 1.0f + 0x3p-8f,
                            3.39e38f, 1e-39f, -1.17549e-38f, 0.0f,           -0.0f};
  for (const auto& [m, n, k] : kShapes) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n));
    for (float& e : a) e = u(gen);
    for (size_t i = 0; i < a.size() && i < std::size(specials); ++i)
      a[i * 7 % a.size()] = specials[i];
    for (float& e : b) e = round_to(Precision::bf16, u(gen));
    std::vector<float> a_bf16 = a;
    for (float& e : a_bf16) e = round_to(Precision::bf16, e);
    Bf16Pairs rounds;
    rounds.a_rounds = true;
    // A = X^T with X [k x m] stored row by row (a_rs = 1, a_cs = m), and A with rows contiguous
    // (a_rs = k, a_cs = 1).
    for (const auto& [a_rs, a_cs] : {std::pair<int64_t, int64_t>{1, m}, {k, 1}}) {
      std::vector<float> want(static_cast<size_t>(m * n), 1.0f), got = want;
      // got first: the pairing buffer then holds no pairs of this A yet.
      gemm_tile_bf16(m, n, k, a.data(), a_rs, a_cs, b.data(), n, got.data(), n, 1.0f, true, rounds);
      gemm_tile_bf16(m, n, k, a_bf16.data(), a_rs, a_cs, b.data(), n, want.data(), n, 1.0f, true);
      int64_t mismatches = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        mismatches += std::isnan(want[i]) != std::isnan(got[i]) ||
                      (!std::isnan(want[i]) && float_bits(want[i]) != float_bits(got[i]));
      }
      EXPECT_EQ(mismatches, 0) << "a_rs " << a_rs;
    }
  }
}

TEST_F(GemmBf16, nan_and_inf_propagate_as_in_fp32) {
  const int64_t m = 3, n = 17, k = 9;
  std::vector<float> a(static_cast<size_t>(m * k), 1.0f), b(static_cast<size_t>(k * n), 2.0f);
  a[0 * k + 4] = kNaN;   // row 0: NaN everywhere
  a[1 * k + 3] = kInf;   // row 1: +inf, except against a 0 (NaN) or -inf
  b[3 * n + 5] = 0.0f;   //   column 5: inf * 0
  b[3 * n + 6] = -1.0f;  //   column 6: -inf
  std::vector<float> c(static_cast<size_t>(m * n));
  gemm_tile_bf16(m, n, k, a.data(), k, 1, b.data(), n, c.data(), n, 1.0f, false);
  for (int64_t x = 0; x < n; ++x) {
    EXPECT_TRUE(std::isnan(c[x])) << x;
    if (x == 5) {
      EXPECT_TRUE(std::isnan(c[n + x]));
    } else {
      EXPECT_EQ(c[n + x], x == 6 ? -kInf : kInf) << x;
    }
    const float rest = 2.0f * (k - 1);  // row 2 against column x without row 3 of B
    EXPECT_EQ(c[2 * n + x], x == 5 ? rest : x == 6 ? rest - 1.0f : rest + 2.0f) << x;
  }
}

}  // namespace
}  // namespace attnscope::cpu
