// Where the reference backward takes P from (AttnParams::backward_p): `saved` (the forward's
// exp(s - m) / l, eager autograd) and `from_lse` (exp(s - LSE), FlashAttention-family
// kernels) agree to rounding on ordinary rows and differ by a factor Sk on a row whose every
// score is the finite sentinel finfo.min, where LSE = m absorbs log Sk.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "kernels/reference/reference_attention.h"
#include "tests/kernels/reference_test_util.h"

namespace attnscope {
namespace {

using test::Inputs;
using test::random_inputs;
using test::sizes;

constexpr double kFinfoMin = -3.4028234663852886e38;  // torch.finfo(torch.float32).min

size_t at(int64_t i) {
  return static_cast<size_t>(i);
}

// A [1, 1, Sq, Sk] bias: 0, except finfo.min on every key of row `row`.
void add_sentinel_row(Inputs& in, int64_t row) {
  const int64_t Sq = in.p.seqlen_q, Sk = in.p.seqlen_k;
  in.bias.assign(at(Sq * Sk), 0.0);
  for (int64_t j = 0; j < Sk; ++j) in.bias[at(row * Sk + j)] = kFinfoMin;
  in.p.bias_strides = {0, 0, Sk, 1};
}

ReferenceTrace run_with(Inputs in, BackwardP source) {
  in.p.backward_p = source;
  return in.run();
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double e : x) m = std::max(m, std::abs(e));
  return m;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = rel * std::max(1.0, max_abs(want));
  for (size_t e = 0; e < got.size(); ++e)
    EXPECT_NEAR(got[e], want[e], tol) << what << "[" << e << "]";
}

// One query row, all of it the sentinel: LSE = m, so from_lse recomputes P = 1 on all Sk = 5
// keys instead of 1/5 and every gradient is 5 times eager's (PyTorch 2.11 CPU flash SDPA vs
// eager behave exactly so). The forward does not change.
TEST(ReferenceBackwardP, from_lse_sentinel_row_gradient_is_sk_times_eager) {
  Inputs in = random_inputs(sizes(1, 1, 1, 1, 5, 4, 3), 91);
  add_sentinel_row(in, 0);
  const ReferenceTrace saved = run_with(in, BackwardP::saved);
  const ReferenceTrace lse = run_with(in, BackwardP::from_lse);
  EXPECT_EQ(saved.lse[0], saved.m[0]);  // log 5 absorbed
  EXPECT_EQ(lse.o, saved.o);
  EXPECT_EQ(lse.lse, saved.lse);
  for (double p : saved.p) EXPECT_NEAR(p, 0.2, 1e-16);
  std::vector<double> five_dq, five_dk, five_dv;
  for (double g : saved.dq) five_dq.push_back(5 * g);
  for (double g : saved.dk) five_dk.push_back(5 * g);
  for (double g : saved.dv) five_dv.push_back(5 * g);
  expect_close(lse.dq, five_dq, 1e-14, "dq");
  expect_close(lse.dk, five_dk, 1e-14, "dk");
  expect_close(lse.dv, five_dv, 1e-14, "dv");
  EXPECT_GT(max_abs(saved.dq), 1e-3);
}

// Row 2 of 4 is the sentinel row: its dQ is Sk times the saved one, every other dQ row agrees
// to rounding, and dK, dV gain (Sk - 1) times row 2's saved share (measured by zeroing dO_2).
TEST(ReferenceBackwardP, from_lse_sentinel_row_among_ordinary_rows_scales_only_its_share) {
  const int64_t Sq = 4, Sk = 6, D = 3, Dv = 2;
  Inputs in = random_inputs(sizes(1, 1, 1, Sq, Sk, D, Dv), 101);
  add_sentinel_row(in, 2);
  const ReferenceTrace saved = run_with(in, BackwardP::saved);
  const ReferenceTrace lse = run_with(in, BackwardP::from_lse);
  Inputs without = in;
  for (int64_t c = 0; c < Dv; ++c) without.dout[at(2 * Dv + c)] = 0;
  const ReferenceTrace others = run_with(without, BackwardP::saved);
  for (int64_t i = 0; i < Sq; ++i) {
    for (int64_t e = 0; e < D; ++e) {
      const double want = (i == 2 ? Sk : 1) * saved.dq[at(i * D + e)];
      EXPECT_NEAR(lse.dq[at(i * D + e)], want, 1e-13) << "dq " << i << "," << e;
    }
  }
  for (const auto& [got, base, rest] :
       {std::tuple{&lse.dk, &saved.dk, &others.dk}, std::tuple{&lse.dv, &saved.dv, &others.dv}}) {
    for (size_t e = 0; e < got->size(); ++e) {
      const double share = (*base)[e] - (*rest)[e];
      EXPECT_NEAR((*got)[e], (*base)[e] + (Sk - 1) * share, 1e-13) << e;
    }
  }
}

// Ordinary rows (GQA, causal bottom-right, bool mask, softcap, dropout): the two sources agree
// to fp64 rounding.
TEST(ReferenceBackwardP, from_lse_within_rounding_of_saved_on_ordinary_rows) {
  Inputs in = random_inputs(sizes(2, 4, 2, 9, 13, 5, 4), 111);
  in.p.causal = true;
  in.p.causal_align = CausalAlign::bottom_right;
  in.p.softcap = 2.0;
  in.mask.resize(at(9 * 13));
  for (size_t e = 0; e < in.mask.size(); ++e) in.mask[e] = e % 5 != 3;
  in.p.mask_strides = {0, 0, 13, 1};
  in.keep.resize(at(9 * 13));
  for (size_t e = 0; e < in.keep.size(); ++e) in.keep[e] = e % 7 != 2;
  in.p.dropout_strides = {0, 0, 13, 1};
  in.p.dropout_p = 0.2;
  const ReferenceTrace saved = run_with(in, BackwardP::saved);
  const ReferenceTrace lse = run_with(in, BackwardP::from_lse);
  EXPECT_EQ(lse.o, saved.o);
  expect_close(lse.ds, saved.ds, 1e-13, "ds");
  expect_close(lse.dq, saved.dq, 1e-13, "dq");
  expect_close(lse.dk, saved.dk, 1e-13, "dk");
  expect_close(lse.dv, saved.dv, 1e-13, "dv");
}

// A fully masked row keeps P = 0 under the safe fill (LSE = -inf would give exp(-inf + inf))
// and stays NaN under -inf, as with the saved P.
TEST(ReferenceBackwardP, from_lse_fully_masked_row_safe_zero_neg_inf_nan) {
  const ReferenceTrace safe = run_with(test::masked_row_case(MaskFill::safe), BackwardP::from_lse);
  for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(safe.dq[at(c)], 0.0);
  for (double x : safe.ds) EXPECT_TRUE(std::isfinite(x));
  for (double x : safe.dk) EXPECT_TRUE(std::isfinite(x));
  for (double x : safe.dv) EXPECT_TRUE(std::isfinite(x));
  const ReferenceTrace nan =
      run_with(test::masked_row_case(MaskFill::neg_inf), BackwardP::from_lse);
  for (int64_t c = 0; c < 2; ++c) EXPECT_TRUE(std::isnan(nan.dq[at(c)]));
  for (double x : nan.dv) EXPECT_TRUE(std::isnan(x));
}

}  // namespace
}  // namespace attnscope
