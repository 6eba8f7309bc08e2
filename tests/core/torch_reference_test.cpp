// Cross-check of the naive fp64 reference kernel against LibTorch fp64 autograd on
// tile-breaking shapes, masks, biases, softcap, GQA and every mask fill policy.
#include "core/torch_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/reference/reference_attention.h"

namespace attnscope {
namespace {

const double kInf = std::numeric_limits<double>::infinity();

enum class MaskKind { none, key_padding, full, full_with_empty_rows };
enum class BiasKind { none, query_key, per_head_with_neg_inf, empty_row };
// Non-finite inputs: one NaN in q (row 3 of the first head), or NaN in k / v at the keys the
// key-padding mask hides (DESIGN §4 masked_nan_leak).
enum class NanKind { none, q_row, padded_k, padded_v };

// One cross-check case; built with chained setters so the table below reads like a spec.
struct Spec {
  std::string name;
  AttnParams p;
  MaskKind mask = MaskKind::none;
  BiasKind bias = BiasKind::none;
  NanKind nan = NanKind::none;
  bool with_dout = true;
  double qk_gain = 1;  // multiplies q and k (larger scores for softcap cases)

  explicit Spec(std::string n) : name(std::move(n)) {}
  Spec& dims(int64_t b, int64_t h, int64_t hk, int64_t sq, int64_t sk, int64_t d, int64_t dv) {
    p.batch = b;
    p.heads = h;
    p.kv_heads = hk;
    p.seqlen_q = sq;
    p.seqlen_k = sk;
    p.head_dim = d;
    p.head_dim_v = dv;
    p.scale = 1.0 / std::sqrt(static_cast<double>(d));
    return *this;
  }
  Spec& causal(CausalAlign align) {
    p.causal = true;
    p.causal_align = align;
    return *this;
  }
  Spec& masked(MaskKind kind) {
    mask = kind;
    return *this;
  }
  Spec& biased(BiasKind kind) {
    bias = kind;
    return *this;
  }
  Spec& softcap(double cap, double gain) {
    p.softcap = cap;
    qk_gain = gain;
    return *this;
  }
  Spec& fill(MaskFill f, Precision precision = Precision::f64) {
    p.mask_fill = f;
    p.precision = precision;
    return *this;
  }
  Spec& poisoned(NanKind kind) {
    nan = kind;
    return *this;
  }
  Spec& no_dout() {
    with_dout = false;
    return *this;
  }
};

// gtest prints a failing parameter by its name instead of its bytes.
void PrintTo(const Spec& spec, std::ostream* os) {
  *os << spec.name;
}

// Deterministic inputs of a Spec; mask / bias pointers in `p` point into this struct.
struct Inputs {
  AttnParams p;
  std::vector<double> q, k, v, dout, bias;
  std::vector<uint8_t> mask;
};

std::vector<double> normal_vector(int64_t n, std::mt19937_64& rng, double gain = 1) {
  std::normal_distribution<double> dist(0.0, gain);
  std::vector<double> out(static_cast<size_t>(n));
  for (double& x : out) x = dist(rng);
  return out;
}

Inputs make_inputs(const Spec& spec, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Inputs in;
  AttnParams& p = in.p;
  p = spec.p;
  const int64_t B = p.batch, H = p.heads, Hk = p.kv_heads, Sq = p.seqlen_q, Sk = p.seqlen_k;
  in.q = normal_vector(B * H * Sq * p.head_dim, rng, spec.qk_gain);
  in.k = normal_vector(B * Hk * Sk * p.head_dim, rng, spec.qk_gain);
  in.v = normal_vector(B * Hk * Sk * p.head_dim_v, rng);
  if (spec.with_dout) in.dout = normal_vector(B * H * Sq * p.head_dim_v, rng);

  std::uniform_real_distribution<double> unit(0.0, 1.0);
  switch (spec.mask) {
    case MaskKind::none:
      break;
    case MaskKind::key_padding:  // [B, 1, 1, Sk]: batch b keeps its first Sk - 3b keys
      in.mask.assign(static_cast<size_t>(B * Sk), 1);
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t j = std::max<int64_t>(1, Sk - 3 * b); j < Sk; ++j) in.mask[b * Sk + j] = 0;
      }
      p.mask_strides = {Sk, 0, 0, 1};
      break;
    case MaskKind::full:  // [B, H, Sq, Sk], ~25 % hidden, key 0 always visible
    case MaskKind::full_with_empty_rows:
      in.mask.assign(static_cast<size_t>(B * H * Sq * Sk), 1);
      for (size_t e = 0; e < in.mask.size(); ++e) {
        in.mask[e] = (e % Sk == 0 || unit(rng) > 0.25) ? 1 : 0;
      }
      if (spec.mask == MaskKind::full_with_empty_rows) {  // every third row of each head
        for (int64_t r = 0; r < B * H * Sq; r += 3) {
          std::fill_n(in.mask.begin() + r * Sk, Sk, uint8_t{0});
        }
      }
      p.mask_strides = {H * Sq * Sk, Sq * Sk, Sk, 1};
      break;
  }
  switch (spec.bias) {
    case BiasKind::none:
      break;
    case BiasKind::query_key:  // [Sq, Sk] broadcast over batch and heads
      in.bias = normal_vector(Sq * Sk, rng, 0.5);
      p.bias_strides = {0, 0, Sk, 1};
      break;
    case BiasKind::per_head_with_neg_inf:  // [1, H, Sq, Sk], ~10 % -inf, key 0 finite
      in.bias = normal_vector(H * Sq * Sk, rng, 0.5);
      for (size_t e = 0; e < in.bias.size(); ++e) {
        if (e % Sk != 0 && unit(rng) < 0.1) in.bias[e] = -kInf;
      }
      p.bias_strides = {0, Sq * Sk, Sk, 1};
      break;
    case BiasKind::empty_row:  // [1, 1, Sq, Sk] with row 0 entirely -inf
      in.bias = normal_vector(Sq * Sk, rng, 0.5);
      std::fill_n(in.bias.begin(), Sk, -kInf);
      p.bias_strides = {0, 0, Sk, 1};
      break;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (spec.nan == NanKind::q_row) in.q[3 * p.head_dim + 1] = nan;
  if (spec.nan == NanKind::padded_k || spec.nan == NanKind::padded_v) {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t hk = 0; hk < Hk; ++hk) {
        for (int64_t j = 0; j < Sk; ++j) {
          if (in.mask[b * Sk + j] != 0) continue;
          if (spec.nan == NanKind::padded_k) in.k[((b * Hk + hk) * Sk + j) * p.head_dim] = nan;
          if (spec.nan == NanKind::padded_v) in.v[((b * Hk + hk) * Sk + j) * p.head_dim_v] = nan;
        }
      }
    }
  }
  p.mask = in.mask.empty() ? nullptr : in.mask.data();
  p.bias = in.bias.empty() ? nullptr : in.bias.data();
  return in;
}

// max|a - b| / max(max|b|, tiny) over elements where b is finite; non-finite elements must
// match exactly (NaN where NaN, same infinity). Returns the error, records mismatches.
double relative_max_error(const std::vector<double>& a, const std::vector<double>& b,
                          const char* name) {
  EXPECT_EQ(a.size(), b.size()) << name;
  if (a.size() != b.size()) return kInf;
  double max_err = 0, max_ref = 0;
  int64_t nonfinite_mismatches = 0, first = -1;
  for (size_t e = 0; e < a.size(); ++e) {
    if (std::isnan(b[e]) || std::isinf(b[e])) {
      const bool same = std::isnan(b[e]) ? std::isnan(a[e]) : a[e] == b[e];
      if (!same && nonfinite_mismatches++ == 0) first = static_cast<int64_t>(e);
      continue;
    }
    if (!std::isfinite(a[e])) {
      if (nonfinite_mismatches++ == 0) first = static_cast<int64_t>(e);
      continue;
    }
    max_err = std::max(max_err, std::abs(a[e] - b[e]));
    max_ref = std::max(max_ref, std::abs(b[e]));
  }
  EXPECT_EQ(nonfinite_mismatches, 0)
      << name << ": first at " << first << " reference " << (first >= 0 ? a[first] : 0) << " torch "
      << (first >= 0 ? b[first] : 0);
  return max_err / std::max(max_ref, 1e-300);
}

class ReferenceVsTorch : public ::testing::TestWithParam<Spec> {};

TEST_P(ReferenceVsTorch, outputs_and_gradients_agree_to_1e_12) {
  const Spec& spec = GetParam();
  const Inputs in = make_inputs(spec, 0x5eed0000u + std::hash<std::string>{}(spec.name) % 1000);
  const double* dout = in.dout.empty() ? nullptr : in.dout.data();
  const ReferenceTrace ref = reference_attention(in.p, in.q.data(), in.k.data(), in.v.data(), dout);
  const TorchReference torch =
      torch_reference_attention(in.p, in.q.data(), in.k.data(), in.v.data(), dout);

  const double tol = 1e-12;
  const auto check = [&](const std::vector<double>& a, const std::vector<double>& b,
                         const char* name) {
    const double err = relative_max_error(a, b, name);
    char text[32];
    std::snprintf(text, sizeof text, "%.3e", err);
    RecordProperty(std::string("rel_err_") + name, text);
    EXPECT_LE(err, tol) << name;
  };
  check(ref.o, torch.o, "o");
  check(ref.lse, torch.lse, "lse");
  check(ref.dq, torch.dq, "dq");
  check(ref.dk, torch.dk, "dk");
  check(ref.dv, torch.dv, "dv");
}

constexpr CausalAlign kTopLeft = CausalAlign::top_left;
constexpr CausalAlign kBottomRight = CausalAlign::bottom_right;

std::vector<Spec> specs() {
  return {
      Spec("sq1_sk1_d16").dims(1, 1, 1, 1, 1, 16, 16),
      Spec("sq17_sk17_d59").dims(2, 2, 2, 17, 17, 59, 59),
      Spec("sq97_sk97_d64").dims(1, 2, 2, 97, 97, 64, 64),
      Spec("sq128_sk128_d128").dims(1, 1, 1, 128, 128, 128, 128),
      Spec("sq1025_sk1025_d16").dims(1, 1, 1, 1025, 1025, 16, 16),
      Spec("sq1025_sk1025_d128_causal").dims(1, 1, 1, 1025, 1025, 128, 128).causal(kTopLeft),
      Spec("sq1_sk97_d111").dims(1, 2, 2, 1, 97, 111, 111),
      Spec("sq17_sk97_d111").dims(1, 2, 2, 17, 97, 111, 111),
      Spec("sq97_sk17_d64").dims(2, 1, 1, 97, 17, 64, 64),
      Spec("sq128_sk1025_d16").dims(1, 1, 1, 128, 1025, 16, 16),
      Spec("causal_top_left_sq97_d64").dims(1, 2, 2, 97, 97, 64, 64).causal(kTopLeft),
      Spec("causal_top_left_sq17_sk97_d59").dims(1, 2, 2, 17, 97, 59, 59).causal(kTopLeft),
      Spec("causal_bottom_right_sq17_sk97_d59").dims(1, 2, 2, 17, 97, 59, 59).causal(kBottomRight),
      Spec("causal_top_left_sq97_sk17_d16").dims(1, 1, 1, 97, 17, 16, 16).causal(kTopLeft),
      // Sq > Sk bottom-right: the first 80 rows see no key -> NaN rows, NaN dk / dv.
      Spec("causal_bottom_right_sq97_sk17_neg_inf_nan_rows")
          .dims(1, 1, 1, 97, 17, 16, 16)
          .causal(kBottomRight),
      Spec("causal_bottom_right_sq97_sk17_safe_zero_rows")
          .dims(1, 1, 1, 97, 17, 16, 16)
          .causal(kBottomRight)
          .fill(MaskFill::safe),
      Spec("gqa_h4_hk2_sq97_d64").dims(2, 4, 2, 97, 97, 64, 64),
      Spec("mqa_h4_hk1_sq17_sk97_d59_causal").dims(1, 4, 1, 17, 97, 59, 59).causal(kBottomRight),
      Spec("key_padding_b3_sq17_sk97_d64")
          .dims(3, 2, 2, 17, 97, 64, 64)
          .masked(MaskKind::key_padding),
      Spec("full_mask_sq97_sk128_d59").dims(2, 2, 1, 97, 128, 59, 59).masked(MaskKind::full),
      Spec("nan_q_row_neg_inf").dims(1, 2, 1, 17, 33, 16, 16).poisoned(NanKind::q_row),
      Spec("nan_q_row_safe_stays_nan")
          .dims(1, 2, 1, 17, 33, 16, 16)
          .poisoned(NanKind::q_row)
          .fill(MaskFill::safe),
      Spec("nan_k_in_padding_leaks_into_dq_only")
          .dims(2, 2, 2, 17, 33, 16, 16)
          .masked(MaskKind::key_padding)
          .poisoned(NanKind::padded_k),
      Spec("nan_v_in_padding_leaks_into_o")
          .dims(2, 2, 2, 17, 33, 16, 16)
          .masked(MaskKind::key_padding)
          .poisoned(NanKind::padded_v),
      Spec("bias_neg_inf_sq97_d64")
          .dims(1, 4, 2, 97, 97, 64, 64)
          .biased(BiasKind::per_head_with_neg_inf),
      Spec("bias_broadcast_causal_mask_sq17_sk97_d111")
          .dims(2, 2, 2, 17, 97, 111, 111)
          .causal(kTopLeft)
          .masked(MaskKind::key_padding)
          .biased(BiasKind::query_key),
      Spec("softcap_30_sq97_d64").dims(1, 2, 2, 97, 97, 64, 64).softcap(30, 6),
      Spec("softcap_5_causal_bias_sq17_sk97_d59")
          .dims(1, 2, 1, 17, 97, 59, 59)
          .causal(kBottomRight)
          .biased(BiasKind::query_key)
          .softcap(5, 3),
      Spec("dv_differs_d64_dv32_sq97").dims(1, 2, 2, 97, 97, 64, 32),
      Spec("dv_differs_d16_dv111_sq17_sk128").dims(1, 2, 1, 17, 128, 16, 111),
      Spec("no_dout_sq17_sk97_d59").dims(1, 2, 2, 17, 97, 59, 59).no_dout(),
      Spec("empty_rows_neg_inf_nan")
          .dims(1, 2, 2, 17, 33, 16, 16)
          .masked(MaskKind::full_with_empty_rows),
      Spec("empty_rows_neg_1e9_uniform")
          .dims(1, 2, 2, 17, 33, 16, 16)
          .masked(MaskKind::full_with_empty_rows)
          .fill(MaskFill::neg_1e9),
      Spec("empty_rows_finfo_min_f16")
          .dims(1, 2, 2, 17, 33, 16, 16)
          .masked(MaskKind::full_with_empty_rows)
          .fill(MaskFill::finfo_min, Precision::f16),
      Spec("empty_rows_safe_zero")
          .dims(2, 2, 1, 17, 33, 16, 16)
          .masked(MaskKind::full_with_empty_rows)
          .fill(MaskFill::safe),
      Spec("bias_empty_row_safe_zero")
          .dims(1, 2, 2, 17, 33, 16, 16)
          .biased(BiasKind::empty_row)
          .fill(MaskFill::safe),
      Spec("bias_empty_row_neg_inf_nan").dims(1, 2, 2, 17, 33, 16, 16).biased(BiasKind::empty_row),
  };
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReferenceVsTorch, ::testing::ValuesIn(specs()),
                         [](const ::testing::TestParamInfo<Spec>& info) {
                           return info.param.name;
                         });

// Sanity of the cross-check itself: the NaN pattern of a fully masked row is what DESIGN §3
// says, in both implementations (o and lse NaN in that row only).
TEST(TorchReference, fully_masked_row_neg_inf_nan_only_in_that_row) {
  const Inputs in =
      make_inputs(Spec("x").dims(1, 1, 1, 4, 5, 8, 8).masked(MaskKind::full_with_empty_rows), 7);
  const TorchReference t =
      torch_reference_attention(in.p, in.q.data(), in.k.data(), in.v.data(), in.dout.data());
  for (int64_t i = 0; i < 4; ++i) {
    const bool empty = i % 3 == 0;
    EXPECT_EQ(std::isnan(t.lse[i]), empty) << i;
    EXPECT_EQ(std::isnan(t.o[i * 8]), empty) << i;
    EXPECT_EQ(std::isnan(t.dq[i * 8]), empty) << i;
  }
  for (double x : t.dk) EXPECT_TRUE(std::isnan(x));
}

// A NaN key hidden by the mask does not reach the scores, but dQ = dS K multiplies its zero
// dS by NaN (as PyTorch and FlashAttention do); a NaN value behind the mask reaches O via 0 * NaN.
TEST(TorchReference, masked_nan_leaks_like_pytorch) {
  const Spec base = Spec("x").dims(2, 1, 1, 3, 8, 4, 4).masked(MaskKind::key_padding);
  Inputs in = make_inputs(Spec(base).poisoned(NanKind::padded_k), 9);
  TorchReference t =
      torch_reference_attention(in.p, in.q.data(), in.k.data(), in.v.data(), in.dout.data());
  for (double x : t.o) EXPECT_TRUE(std::isfinite(x));
  for (double x : t.dk) EXPECT_TRUE(std::isfinite(x));
  // The NaN sits in feature 0 of the padded keys of batch 1 (its [3, 4] block starts at 12).
  for (size_t e = 0; e < t.dq.size(); ++e)
    EXPECT_EQ(std::isnan(t.dq[e]), e >= 12 && e % 4 == 0) << e;

  in = make_inputs(Spec(base).poisoned(NanKind::padded_v), 9);
  t = torch_reference_attention(in.p, in.q.data(), in.k.data(), in.v.data(), in.dout.data());
  for (size_t e = 0; e < t.o.size(); ++e) EXPECT_EQ(std::isnan(t.o[e]), e >= 12 && e % 4 == 0) << e;
  for (double x : t.lse) EXPECT_TRUE(std::isfinite(x));
}

TEST(TorchReference, fully_masked_row_safe_zero_output_and_gradients) {
  const Inputs in = make_inputs(Spec("x")
                                    .dims(1, 1, 1, 4, 5, 8, 8)
                                    .masked(MaskKind::full_with_empty_rows)
                                    .fill(MaskFill::safe),
                                7);
  const TorchReference t =
      torch_reference_attention(in.p, in.q.data(), in.k.data(), in.v.data(), in.dout.data());
  EXPECT_EQ(t.lse[0], -kInf);
  EXPECT_EQ(t.lse[3], -kInf);
  EXPECT_TRUE(std::isfinite(t.lse[1]));
  for (int64_t c = 0; c < 8; ++c) {
    EXPECT_EQ(t.o[c], 0.0);
    EXPECT_EQ(t.dq[c], 0.0);
  }
  for (double x : t.dk) EXPECT_TRUE(std::isfinite(x));
  for (double x : t.dv) EXPECT_TRUE(std::isfinite(x));
}

}  // namespace
}  // namespace attnscope
