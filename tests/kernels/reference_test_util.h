// Shared helpers of the reference-attention tests: deterministic inputs, sizes, and a
// central-difference gradient check of sum(O * dO).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels/reference/reference_attention.h"

namespace attnscope::test {

inline const double kInf = std::numeric_limits<double>::infinity();

// Inputs of one attention call; pointers in params refer into this struct's vectors.
struct Inputs {
  AttnParams p;
  std::vector<double> q, k, v, dout, bias;
  std::vector<uint8_t> mask, keep;  // keep: optional dropout keep-mask (strides in p)

  ReferenceTrace run() {
    p.mask = mask.empty() ? nullptr : mask.data();
    p.dropout_keep = keep.empty() ? nullptr : keep.data();
    p.bias = bias.empty() ? nullptr : bias.data();
    return reference_attention(p, q.data(), k.data(), v.data(),
                               dout.empty() ? nullptr : dout.data());
  }
};

inline std::vector<double> random_vector(size_t n, uint64_t seed, double lo = -1, double hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> out(n);
  for (double& x : out) x = dist(rng);
  return out;
}

// Random q, k, v, dO for the sizes in p; scale 1/sqrt(D).
inline Inputs random_inputs(AttnParams p, uint64_t seed) {
  Inputs in;
  p.scale = 1.0 / std::sqrt(static_cast<double>(p.head_dim));
  in.p = p;
  const int64_t nq = p.batch * p.heads * p.seqlen_q;
  const int64_t nk = p.batch * p.kv_heads * p.seqlen_k;
  in.q = random_vector(static_cast<size_t>(nq * p.head_dim), seed);
  in.k = random_vector(static_cast<size_t>(nk * p.head_dim), seed + 1);
  in.v = random_vector(static_cast<size_t>(nk * p.head_dim_v), seed + 2);
  in.dout = random_vector(static_cast<size_t>(nq * p.head_dim_v), seed + 3);
  return in;
}

inline AttnParams sizes(int64_t b, int64_t h, int64_t hk, int64_t sq, int64_t sk, int64_t d,
                        int64_t dv) {
  AttnParams p;
  p.batch = b;
  p.heads = h;
  p.kv_heads = hk;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.head_dim = d;
  p.head_dim_v = dv;
  return p;
}

// sum(O * dO), the loss whose gradients the reference returns.
inline double loss(Inputs in) {
  const ReferenceTrace t = in.run();
  double acc = 0;
  for (size_t i = 0; i < t.o.size(); ++i) acc += t.o[i] * in.dout[i];
  return acc;
}

// Compares an analytic gradient with central differences of loss() w.r.t. each element of
// the tensor `member` selects.
inline void expect_matches_finite_differences(const Inputs& in, std::vector<double> Inputs::*member,
                                              const std::vector<double>& grad, const char* name) {
  const double h = 1e-5;
  ASSERT_EQ(grad.size(), (in.*member).size());
  for (size_t e = 0; e < grad.size(); ++e) {
    Inputs plus = in, minus = in;
    (plus.*member)[e] += h;
    (minus.*member)[e] -= h;
    const double fd = (loss(plus) - loss(minus)) / (2 * h);
    EXPECT_NEAR(grad[e], fd, 1e-7) << name << "[" << e << "]";
  }
}

inline void expect_gradients_match_finite_differences(Inputs in) {
  const ReferenceTrace t = in.run();
  expect_matches_finite_differences(in, &Inputs::q, t.dq, "dq");
  expect_matches_finite_differences(in, &Inputs::k, t.dk, "dk");
  expect_matches_finite_differences(in, &Inputs::v, t.dv, "dv");
}

// Sq = 2, Sk = 3 with a [1,1,2,3] mask hiding all of row 0 and key 2 of row 1.
inline Inputs masked_row_case(MaskFill fill, Precision precision = Precision::f64) {
  Inputs in = random_inputs(sizes(1, 1, 1, 2, 3, 2, 2), 21);
  in.mask = {0, 0, 0, 1, 1, 0};
  in.p.mask_strides = {0, 0, 3, 1};
  in.p.mask_fill = fill;
  in.p.precision = precision;
  return in;
}

}  // namespace attnscope::test
