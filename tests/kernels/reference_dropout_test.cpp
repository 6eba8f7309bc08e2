// Reference attention with dropout from a known keep-mask: O = (P o Z) V, Z = keep / (1 - p),
// against a naive fp64 computation written here and against finite differences; the softmax
// statistics stay those of the undropped P; dropped entries add exactly 0 but 0 * NaN poisons.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/reference/reference_attention.h"
#include "tests/kernels/reference_test_util.h"

namespace attnscope {
namespace {

using test::expect_gradients_match_finite_differences;
using test::Inputs;
using test::random_inputs;
using test::sizes;

size_t at(int64_t i) {
  return static_cast<size_t>(i);
}

// A full [B, H, Sq, Sk] keep-mask, each entry kept with probability 1 - p.
void add_keep(Inputs& in, double p, uint64_t seed) {
  const AttnParams& a = in.p;
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution drop(p);
  in.keep.resize(at(a.batch * a.heads * a.seqlen_q * a.seqlen_k));
  for (uint8_t& k : in.keep) k = drop(rng) ? 0 : 1;
  in.p.dropout_strides = {a.heads * a.seqlen_q * a.seqlen_k, a.seqlen_q * a.seqlen_k, a.seqlen_k,
                          1};
  in.p.dropout_p = p;
}

struct Naive {
  std::vector<double> o, dq, dk, dv;
};

// Written from the formulas alone (causal top-left and bias only): per (b, h),
// S = scale Q K^T + bias (-inf where causally hidden), P = softmax(S), Z = keep / (1 - p),
// O = (P o Z) V, dV += (P o Z)^T dO, dP = Z o (dO V^T), D = rowsum(dO o O), dS = P o (dP - D),
// dQ = scale dS K, dK += scale dS^T Q.
Naive naive(const Inputs& in) {
  const AttnParams& a = in.p;
  const int64_t Sq = a.seqlen_q, Sk = a.seqlen_k, D = a.head_dim, Dv = a.head_dim_v;
  Naive r;
  r.o.assign(at(a.batch * a.heads * Sq * Dv), 0.0);
  r.dq.assign(at(a.batch * a.heads * Sq * D), 0.0);
  r.dk.assign(at(a.batch * a.kv_heads * Sk * D), 0.0);
  r.dv.assign(at(a.batch * a.kv_heads * Sk * Dv), 0.0);
  std::vector<double> P(at(Sq * Sk)), Z(at(Sq * Sk)), dS(at(Sq * Sk));
  const auto ij = [Sk](int64_t i, int64_t j) { return at(i * Sk + j); };
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t h = 0; h < a.heads; ++h) {
      const int64_t bh = b * a.heads + h, bkv = b * a.kv_heads + h / (a.heads / a.kv_heads);
      const double* q = in.q.data() + bh * Sq * D;
      const double* k = in.k.data() + bkv * Sk * D;
      const double* v = in.v.data() + bkv * Sk * Dv;
      const double* dO = in.dout.data() + bh * Sq * Dv;
      double* o = r.o.data() + bh * Sq * Dv;
      for (int64_t i = 0; i < Sq; ++i) {
        double mx = -test::kInf, sum = 0;
        for (int64_t j = 0; j < Sk; ++j) {
          double s = 0;
          for (int64_t e = 0; e < D; ++e) s += q[i * D + e] * k[j * D + e];
          s = a.scale * s;
          if (!in.bias.empty()) s += in.bias[at(bh * Sq * Sk) + ij(i, j)];
          P[ij(i, j)] = a.causal && j > i ? -test::kInf : s;
          mx = std::max(mx, P[ij(i, j)]);
          Z[ij(i, j)] = in.keep[at(bh * Sq * Sk) + ij(i, j)] / (1 - a.dropout_p);
        }
        for (int64_t j = 0; j < Sk; ++j) {
          P[ij(i, j)] = std::exp(P[ij(i, j)] - mx);
          sum += P[ij(i, j)];
        }
        for (int64_t j = 0; j < Sk; ++j) {
          P[ij(i, j)] /= sum;
          for (int64_t c = 0; c < Dv; ++c)
            o[i * Dv + c] += P[ij(i, j)] * Z[ij(i, j)] * v[j * Dv + c];
        }
      }
      for (int64_t i = 0; i < Sq; ++i) {
        double d = 0;
        for (int64_t c = 0; c < Dv; ++c) d += dO[i * Dv + c] * o[i * Dv + c];
        for (int64_t j = 0; j < Sk; ++j) {
          double dp = 0;
          for (int64_t c = 0; c < Dv; ++c) {
            r.dv[at((bkv * Sk + j) * Dv + c)] += P[ij(i, j)] * Z[ij(i, j)] * dO[i * Dv + c];
            dp += dO[i * Dv + c] * v[j * Dv + c];
          }
          dS[ij(i, j)] = P[ij(i, j)] * (Z[ij(i, j)] * dp - d);
        }
      }
      for (int64_t i = 0; i < Sq; ++i) {
        for (int64_t j = 0; j < Sk; ++j) {
          const double g = a.scale * dS[ij(i, j)];
          for (int64_t e = 0; e < D; ++e) {
            r.dq[at((bh * Sq + i) * D + e)] += g * k[j * D + e];
            r.dk[at((bkv * Sk + j) * D + e)] += g * q[i * D + e];
          }
        }
      }
    }
  }
  return r;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want,
                     const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t e = 0; e < got.size(); ++e) {
    EXPECT_NEAR(got[e], want[e], 1e-12 * std::max(1.0, std::abs(want[e])))
        << what << "[" << e << "]";
  }
}

// GQA 4:2, causal, a bias, Sq != Sk; every kept entry scaled by 1 / 0.7.
TEST(ReferenceDropout, reference_dropout_matches_naive_f64) {
  Inputs in = random_inputs(sizes(2, 4, 2, 7, 9, 5, 3), 31);
  in.p.causal = true;
  in.bias = test::random_vector(at(2 * 4 * 7 * 9), 32);
  in.p.bias_strides = {4 * 7 * 9, 7 * 9, 9, 1};
  add_keep(in, 0.3, 33);
  const ReferenceTrace t = Inputs(in).run();
  const Naive want = naive(in);
  expect_near_all(t.o, want.o, "o");
  expect_near_all(t.dq, want.dq, "dq");
  expect_near_all(t.dk, want.dk, "dk");
  expect_near_all(t.dv, want.dv, "dv");
  int64_t dropped = 0;
  for (uint8_t k : in.keep) dropped += k == 0;
  EXPECT_GT(dropped, 0);
}

TEST(ReferenceDropout, reference_dropout_gradients_match_finite_differences) {
  Inputs in = random_inputs(sizes(1, 2, 1, 3, 4, 2, 3), 41);
  add_keep(in, 0.4, 42);
  expect_gradients_match_finite_differences(in);
}

// m, l, LSE, S and P are those of the undropped softmax; dP is Z o (dO V^T); D = dO . O.
TEST(ReferenceDropout, softmax_stats_stay_undropped_and_dp_is_scaled_by_z) {
  Inputs in = random_inputs(sizes(1, 1, 1, 5, 6, 4, 4), 51);
  const ReferenceTrace plain = Inputs(in).run();
  add_keep(in, 0.25, 52);
  const ReferenceTrace t = Inputs(in).run();
  EXPECT_EQ(t.s, plain.s);
  EXPECT_EQ(t.p, plain.p);
  EXPECT_EQ(t.m, plain.m);
  EXPECT_EQ(t.l, plain.l);
  EXPECT_EQ(t.lse, plain.lse);
  EXPECT_NE(t.o, plain.o);
  for (size_t e = 0; e < t.dp.size(); ++e) {
    EXPECT_EQ(t.dp[e], in.keep[e] != 0 ? (1.0 / (1.0 - 0.25)) * plain.dp[e] : 0.0) << e;
  }
  for (int64_t i = 0; i < 5; ++i) {
    double d = 0, pdp = 0;
    for (int64_t c = 0; c < 4; ++c) d += in.dout[at(i * 4 + c)] * t.o[at(i * 4 + c)];
    for (int64_t j = 0; j < 6; ++j) pdp += t.p[at(i * 6 + j)] * t.dp[at(i * 6 + j)];
    EXPECT_NEAR(t.d[at(i)], d, 1e-14);
    EXPECT_NEAR(t.d[at(i)], pdp, 1e-12);  // D = rowsum(dO o O) = rowsum(P o dP)
  }
}

TEST(ReferenceDropout, all_kept_with_p0_is_bit_identical_to_no_dropout) {
  Inputs in = random_inputs(sizes(1, 2, 2, 4, 7, 3, 5), 61);
  in.p.causal = true;
  const ReferenceTrace plain = Inputs(in).run();
  add_keep(in, 0.0, 62);
  const ReferenceTrace t = Inputs(in).run();
  EXPECT_EQ(t.o, plain.o);
  EXPECT_EQ(t.dp, plain.dp);
  EXPECT_EQ(t.ds, plain.ds);
  EXPECT_EQ(t.dq, plain.dq);
  EXPECT_EQ(t.dk, plain.dk);
  EXPECT_EQ(t.dv, plain.dv);
}

// A [1, 1, Sq, Sk] keep-mask broadcast over batch and heads equals the same mask repeated.
TEST(ReferenceDropout, broadcast_keep_mask_equals_the_repeated_full_mask) {
  Inputs full = random_inputs(sizes(2, 2, 1, 3, 5, 4, 4), 71);
  Inputs bcast = full;
  add_keep(bcast, 0.5, 72);
  bcast.keep.resize(15);
  bcast.p.dropout_strides = {0, 0, 5, 1};
  full.keep.clear();
  for (int rep = 0; rep < 4; ++rep)
    full.keep.insert(full.keep.end(), bcast.keep.begin(), bcast.keep.end());
  full.p.dropout_p = 0.5;
  full.p.dropout_strides = {2 * 15, 15, 5, 1};
  const ReferenceTrace a = bcast.run(), b = full.run();
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
}

// Key 2 is dropped for every query, and v_2 is all NaN: its weights are 0, yet 0 * NaN poisons O
// and, through dP = 0 * (dO . v_2), dS, dQ and dK, as torch.dropout(P) @ V and its autograd do.
// dV_2 = sum_i 0 * dO_i stays 0.
TEST(ReferenceDropout, dropped_key_with_nan_value_still_poisons) {
  Inputs in = random_inputs(sizes(1, 1, 1, 3, 4, 2, 2), 81);
  add_keep(in, 0.5, 82);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 4; ++j) in.keep[at(i * 4 + j)] = j != 2;
  }
  in.v[4] = in.v[5] = std::numeric_limits<double>::quiet_NaN();
  const ReferenceTrace t = Inputs(in).run();
  for (double x : t.o) EXPECT_TRUE(std::isnan(x));
  for (double x : t.dq) EXPECT_TRUE(std::isnan(x));
  for (double x : t.dk) EXPECT_TRUE(std::isnan(x));
  EXPECT_EQ(t.dv[4], 0.0);
  EXPECT_EQ(t.dv[5], 0.0);
  for (double x : t.lse) EXPECT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace attnscope
