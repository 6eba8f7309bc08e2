// The fp64 references, kernels/reference (reference_attention) and core/analysis/reference64
// (streamed forward and backward, bit for bit the naive one on every instruction set), against
// LibTorch fp64 autograd on every mask form a replay meets, to 1e-12 relative: with
// BackwardP::saved against eager autograd (torch_reference_attention) and against SDPA MATH (the
// torch-sdpa-math variant at fp64: at::_scaled_dot_product_attention_math, _safe_softmax); with
// BackwardP::from_lse against PyTorch's CPU flash kernel at fp64 (torch-flash-cpu: its forward
// and backward ops).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/analysis/reference64.h"
#include "core/kernel_registry.h"
#include "core/torch_reference.h"
#include "kernels/reference/reference_attention.h"

namespace attnscope {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kFloatMin = -3.4028234663852886e38;  // torch.finfo(torch.float32).min

enum class MaskKind { none, full, key_padding };
enum class BiasKind { none, normal, finfo_min_keys, finfo_min_rows, neg_inf_keys, neg_inf_rows };

// One mask form; chained setters keep the table below readable as a spec.
struct Form {
  std::string name;
  AttnParams p;
  MaskKind mask = MaskKind::none;
  bool empty_rows = false;  // every third query row of the full mask hides every key
  BiasKind bias = BiasKind::none;
  bool nan_v_at_padding = false;  // NaN in v at the keys the key-padding mask hides
  bool nan_k_at_padding = false;  // NaN in k there
  // Why SDPA MATH / the CPU flash kernel do not run the form's semantics; empty: they do.
  std::string no_sdpa, no_flash;

  explicit Form(std::string n) : name(std::move(n)) {
    dims(1, 2, 2, 17, 33, 16);
    p.precision = Precision::f64;
  }
  Form& dims(int64_t b, int64_t h, int64_t hk, int64_t sq, int64_t sk, int64_t d) {
    p.batch = b;
    p.heads = h;
    p.kv_heads = hk;
    p.seqlen_q = sq;
    p.seqlen_k = sk;
    p.head_dim = p.head_dim_v = d;
    p.scale = 1.0 / std::sqrt(static_cast<double>(d));
    return *this;
  }
  Form& causal(CausalAlign align) {
    p.causal = true;
    p.causal_align = align;
    if (align == CausalAlign::bottom_right && p.seqlen_q != p.seqlen_k) {
      no_flash = "PyTorch's CPU flash kernel aligns causal masks top-left only";
    }
    return *this;
  }
  Form& masked(MaskKind kind, bool with_empty_rows = false) {
    mask = kind;
    empty_rows = with_empty_rows;
    return *this;
  }
  Form& biased(BiasKind kind) {
    bias = kind;
    return *this;
  }
  Form& fill(MaskFill f) {
    p.mask_fill = f;
    return *this;
  }
  Form& not_sdpa(std::string why) {
    no_sdpa = no_flash = std::move(why);
    return *this;
  }
  Form& nan_v() {
    nan_v_at_padding = true;
    return *this;
  }
  Form& nan_k() {
    nan_k_at_padding = true;
    return *this;
  }
  Form& softcap(double cap) {
    p.softcap = cap;
    return not_sdpa("SDPA has no tanh softcap");
  }
  Form& dropout(double prob) {
    p.dropout_p = prob;
    p.dropout_strides = {p.heads * p.seqlen_q * p.seqlen_k, p.seqlen_q * p.seqlen_k, p.seqlen_k, 1};
    no_flash = "PyTorch's CPU flash kernel has no dropout";
    return *this;
  }
};

void PrintTo(const Form& f, std::ostream* os) {
  *os << f.name;
}

// Deterministic inputs of a form as a CaseInputs (what compute_reference64 takes); params'
// mask / bias / keep-mask pointers point into it.
CaseInputs make_inputs(const Form& f) {
  std::mt19937_64 rng(std::hash<std::string>{}(f.name));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CaseInputs in;
  AttnParams& p = in.params;
  p = f.p;
  const int64_t B = p.batch, H = p.heads, Hk = p.kv_heads, Sq = p.seqlen_q, Sk = p.seqlen_k;
  const auto draw = [&](std::vector<double>& x, int64_t n, double gain) {
    x.resize(static_cast<size_t>(n));
    for (double& e : x) e = gain * normal(rng);
  };
  draw(in.q, B * H * Sq * p.head_dim, 1);
  draw(in.k, B * Hk * Sk * p.head_dim, 1);
  draw(in.v, B * Hk * Sk * p.head_dim_v, 1);
  draw(in.dout, B * H * Sq * p.head_dim_v, 1);
  in.has_dout = true;

  const auto padded = [&](int64_t b, int64_t j) { return j >= std::max<int64_t>(1, Sk - 3 * b); };
  if (f.mask != MaskKind::none) {  // [B, H, Sq, Sk]
    in.mask.resize(static_cast<size_t>(B * H * Sq * Sk));
    for (int64_t e = 0; e < B * H * Sq * Sk; ++e) {
      const int64_t j = e % Sk, b = e / (H * Sq * Sk), row = e / Sk;
      const bool hidden =
          f.mask == MaskKind::key_padding ? padded(b, j) : j != 0 && unit(rng) < 0.25;
      in.mask[e] = !hidden && !(f.empty_rows && row % 3 == 0);
    }
    p.mask_strides = {H * Sq * Sk, Sq * Sk, Sk, 1};
  }
  if (f.bias != BiasKind::none) {  // [1, H, Sq, Sk]
    draw(in.bias, H * Sq * Sk, 0.5);
    for (int64_t e = 0; e < H * Sq * Sk; ++e) {  // rows 0, 5, 10, ... of every head
      const int64_t j = e % Sk, i = e / Sk % Sq;
      const bool some_key = j != 0 && unit(rng) < 0.3;
      const bool whole_row = i % 5 == 0;
      if (f.bias == BiasKind::finfo_min_keys && some_key) in.bias[e] = kFloatMin;
      if (f.bias == BiasKind::finfo_min_rows && whole_row) in.bias[e] = kFloatMin;
      if (f.bias == BiasKind::neg_inf_keys && some_key) in.bias[e] = -kInf;
      if (f.bias == BiasKind::neg_inf_rows && whole_row) in.bias[e] = -kInf;
    }
    p.bias_strides = {0, Sq * Sk, Sk, 1};
  }
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < Sk; ++j) {
      if (!padded(b, j)) continue;
      if (f.nan_v_at_padding) in.v[(b * Hk * Sk + j) * p.head_dim_v] = std::nan("");
      if (f.nan_k_at_padding) in.k[(b * Hk * Sk + j) * p.head_dim] = std::nan("");
    }
  }
  if (p.dropout_p > 0) {
    in.dropout_keep.resize(static_cast<size_t>(B * H * Sq * Sk));
    for (uint8_t& keep : in.dropout_keep) keep = unit(rng) >= p.dropout_p;
  }
  p.mask = in.mask.empty() ? nullptr : in.mask.data();
  p.bias = in.bias.empty() ? nullptr : in.bias.data();
  p.dropout_keep = in.dropout_keep.empty() ? nullptr : in.dropout_keep.data();
  return in;
}

// max|a - b| / max|b| over the elements where b is finite (LSE: per element, relative to
// max(|b|, 1), since a sentinel row's LSE of -3.4e38 would hide every other row's error); a
// non-finite b must be matched exactly (NaN where NaN, the same infinity). `skip` leaves out
// elements the comparison does not cover.
double relative_error(const std::vector<double>& a, const std::vector<double>& b, const char* name,
                      bool per_element, const std::vector<bool>& skip = {}) {
  EXPECT_EQ(a.size(), b.size()) << name;
  if (a.size() != b.size()) return kInf;
  double err = 0, top = 0;
  int64_t mismatches = 0, first = -1;
  for (size_t e = 0; e < b.size(); ++e) {
    if (!skip.empty() && skip[e]) continue;
    bool match = std::isfinite(a[e]);
    if (std::isnan(b[e])) match = std::isnan(a[e]);
    if (std::isinf(b[e])) match = a[e] == b[e];
    if (!match) {
      if (mismatches++ == 0) first = static_cast<int64_t>(e);
      continue;
    }
    if (!std::isfinite(b[e])) continue;
    const double diff = std::abs(a[e] - b[e]);
    err = std::max(err, per_element ? diff / std::max(std::abs(b[e]), 1.0) : diff);
    top = std::max(top, std::abs(b[e]));
  }
  EXPECT_EQ(mismatches, 0) << name << ": first non-finite mismatch at " << first << ": "
                           << (first >= 0 ? a[first] : 0) << " vs torch "
                           << (first >= 0 ? b[first] : 0);
  return per_element ? err : err / std::max(top, 1e-300);
}

struct Outputs {
  std::vector<double> o, lse, dq, dk, dv;
};

Outputs of(const ReferenceTrace& t) {
  return {t.o, t.lse, t.dq, t.dk, t.dv};
}
Outputs of(const Reference64& r) {
  return {r.o, r.lse, r.dq, r.dk, r.dv};
}
Outputs of(const TorchReference& t) {
  return {t.o, t.lse, t.dq, t.dk, t.dv};
}
Outputs of(const VariantOutputs& v) {
  return {v.o, v.lse, v.dq, v.dk, v.dv};
}

class MaskForm : public ::testing::TestWithParam<Form> {
 protected:
  // Every output of `ours` within 1e-12 of `torch`; LSE elements in `skip_lse` left out.
  void expect_match(const Outputs& ours, const Outputs& torch,
                    const std::vector<bool>& skip_lse = {}) {
    const auto check = [&](const std::vector<double>& a, const std::vector<double>& b,
                           const char* name, bool per_element, const std::vector<bool>& skip) {
      const double err = relative_error(a, b, name, per_element, skip);
      char text[32];
      std::snprintf(text, sizeof text, "%.3e", err);
      RecordProperty(std::string("rel_err_") + name, text);
      EXPECT_LE(err, 1e-12) << name;
    };
    check(ours.o, torch.o, "o", false, {});
    if (!torch.lse.empty()) check(ours.lse, torch.lse, "lse", true, skip_lse);
    check(ours.dq, torch.dq, "dq", false, {});
    check(ours.dk, torch.dk, "dk", false, {});
    check(ours.dv, torch.dv, "dv", false, {});
  }

  static Outputs reference(const CaseInputs& in) {
    return of(reference_attention(in.params, in.q.data(), in.k.data(), in.v.data(),
                                  in.has_dout ? in.dout.data() : nullptr));
  }
  static Outputs reference64(const CaseInputs& in) {
    return of(compute_reference64(in, /*gradients=*/true, /*threads=*/2));
  }
  // stream_reference64 in rounds of one group per worker (2), its groups put back in place;
  // every group handed over once, in (b, g) order.
  static Outputs streamed_by_group(const CaseInputs& in) {
    const AttnParams& p = in.params;
    const int64_t G = p.group_size(), Sq = p.seqlen_q, Sk = p.seqlen_k;
    const int64_t D = p.head_dim, Dv = p.head_dim_v;
    Reference64 r;
    r.o.resize(static_cast<size_t>(p.batch * p.heads * Sq * Dv));
    r.lse.resize(static_cast<size_t>(p.batch * p.heads * Sq));
    r.dq.resize(static_cast<size_t>(p.batch * p.heads * Sq * D));
    r.dk.resize(static_cast<size_t>(p.batch * p.kv_heads * Sk * D));
    r.dv.resize(static_cast<size_t>(p.batch * p.kv_heads * Sk * Dv));
    int64_t next = 0;  // the (b, g) expected next
    stream_reference64(
        reference_inputs(in), /*gradients=*/true, /*threads=*/2,
        [&](const GroupReference& g) {
          const int64_t bkv = g.b * p.kv_heads + g.g;
          EXPECT_EQ(bkv, next++);
          std::copy_n(g.o, G * Sq * Dv, r.o.begin() + bkv * G * Sq * Dv);
          std::copy_n(g.lse, G * Sq, r.lse.begin() + bkv * G * Sq);
          std::copy_n(g.dq, G * Sq * D, r.dq.begin() + bkv * G * Sq * D);
          std::copy_n(g.dk, Sk * D, r.dk.begin() + bkv * Sk * D);
          std::copy_n(g.dv, Sk * Dv, r.dv.begin() + bkv * Sk * Dv);
        },
        {}, /*round_bytes=*/1);
    EXPECT_EQ(next, p.batch * p.kv_heads);
    return of(r);
  }
  static Outputs eager(const CaseInputs& in) {
    return of(torch_reference_attention(in.params, in.q.data(), in.k.data(), in.v.data(),
                                        in.dout.data()));
  }
  static Outputs variant(const char* name, const CaseInputs& in) {
    const Result<VariantOutputs> r =
        run_variant(*find_variant(name), in.params, {Precision::f64, Mode::fused, 2},
                    {in.q.data(), in.k.data(), in.v.data(), in.dout.data()});
    EXPECT_TRUE(r.ok()) << r.error().describe();
    return r.ok() ? of(*r) : Outputs{};
  }
};

TEST_P(MaskForm, reference_matches_eager_autograd) {
  const CaseInputs in = make_inputs(GetParam());
  expect_match(reference(in), eager(in));
}

TEST_P(MaskForm, reference64_matches_eager_autograd) {
  const CaseInputs in = make_inputs(GetParam());
  expect_match(reference64(in), eager(in));
}

TEST_P(MaskForm, reference_matches_sdpa_math_autograd) {
  if (!GetParam().no_sdpa.empty()) GTEST_SKIP() << GetParam().no_sdpa;
  const CaseInputs in = make_inputs(GetParam());
  expect_match(reference(in), variant("torch-sdpa-math", in));
}

TEST_P(MaskForm, reference64_matches_sdpa_math_autograd) {
  if (!GetParam().no_sdpa.empty()) GTEST_SKIP() << GetParam().no_sdpa;
  const CaseInputs in = make_inputs(GetParam());
  expect_match(reference64(in), variant("torch-sdpa-math", in));
}

// A safe fully masked row stores LSE = -inf in the references and 0 in PyTorch's CPU flash
// kernel (a convention: no P is recomputed from it); that element is checked, not compared.
std::vector<bool> flash_empty_rows(const Outputs& ours, const Outputs& flash) {
  std::vector<bool> skip(ours.lse.size(), false);
  for (size_t r = 0; r < ours.lse.size() && r < flash.lse.size(); ++r) {
    if (ours.lse[r] == -kInf) {
      EXPECT_EQ(flash.lse[r], 0.0) << "row " << r;
      skip[r] = true;
    }
  }
  return skip;
}

TEST_P(MaskForm, reference_from_lse_matches_cpu_flash_f64) {
  if (!GetParam().no_flash.empty()) GTEST_SKIP() << GetParam().no_flash;
  Form f = GetParam();
  f.p.backward_p = BackwardP::from_lse;
  const CaseInputs in = make_inputs(f);
  const Outputs ours = reference(in), flash = variant("torch-flash-cpu", in);
  expect_match(ours, flash, flash_empty_rows(ours, flash));
}

TEST_P(MaskForm, reference64_from_lse_matches_cpu_flash_f64) {
  if (!GetParam().no_flash.empty()) GTEST_SKIP() << GetParam().no_flash;
  Form f = GetParam();
  f.p.backward_p = BackwardP::from_lse;
  const CaseInputs in = make_inputs(f);
  const Outputs ours = reference64(in), flash = variant("torch-flash-cpu", in);
  expect_match(ours, flash, flash_empty_rows(ours, flash));
}

// Bit for bit (NaN matches NaN, signs of zeros too): the streamed reference keeps the naive
// reference's order of every sum, so the two agree exactly, on every block of query rows and
// every key tile, with either P of the backward, with or without a recorded dO.
void expect_bit_identical(const std::vector<double>& a, const std::vector<double>& b,
                          const std::string& name) {
  ASSERT_EQ(a.size(), b.size()) << name;
  int64_t differ = 0, first = -1;
  for (size_t e = 0; e < a.size(); ++e) {
    const bool same = std::isnan(a[e]) ? std::isnan(b[e])
                                       : a[e] == b[e] && std::signbit(a[e]) == std::signbit(b[e]);
    if (!same && differ++ == 0) first = static_cast<int64_t>(e);
  }
  EXPECT_EQ(differ, 0) << name << ": " << differ << " differ, first at " << first << ": "
                       << (first >= 0 ? a[first] : 0) << " vs " << (first >= 0 ? b[first] : 0);
}

TEST_P(MaskForm, reference64_is_the_naive_reference_bit_for_bit) {
  for (const BackwardP source : {BackwardP::saved, BackwardP::from_lse}) {
    for (const bool with_dout : {true, false}) {
      Form f = GetParam();
      f.p.backward_p = source;
      CaseInputs in = make_inputs(f);
      if (!with_dout) {
        in.dout.clear();
        in.has_dout = false;
      }
      const std::string how = std::string(source == BackwardP::saved ? "saved P" : "P from lse") +
                              (with_dout ? ", dO" : ", dO = 1");
      const Outputs naive = reference(in);
      const Outputs streamed = of(compute_reference64(in, /*gradients=*/true, /*threads=*/2));
      const Outputs forward = of(compute_reference64(in, /*gradients=*/false, /*threads=*/2));
      const Outputs grouped = streamed_by_group(in);
      // More workers than (batch, kv group) pairs: they share each group's backward.
      const Outputs shared = of(compute_reference64(in, /*gradients=*/true, /*threads=*/8));
      expect_bit_identical(streamed.o, naive.o, "o, " + how);
      expect_bit_identical(streamed.lse, naive.lse, "lse, " + how);
      expect_bit_identical(forward.o, naive.o, "o of the forward alone, " + how);
      expect_bit_identical(forward.lse, naive.lse, "lse of the forward alone, " + how);
      expect_bit_identical(streamed.dq, naive.dq, "dq, " + how);
      expect_bit_identical(streamed.dk, naive.dk, "dk, " + how);
      expect_bit_identical(streamed.dv, naive.dv, "dv, " + how);
      expect_bit_identical(grouped.o, naive.o, "o streamed by group, " + how);
      expect_bit_identical(grouped.lse, naive.lse, "lse streamed by group, " + how);
      expect_bit_identical(grouped.dq, naive.dq, "dq streamed by group, " + how);
      expect_bit_identical(grouped.dk, naive.dk, "dk streamed by group, " + how);
      expect_bit_identical(grouped.dv, naive.dv, "dv streamed by group, " + how);
      expect_bit_identical(shared.o, naive.o, "o, workers sharing a group, " + how);
      expect_bit_identical(shared.dq, naive.dq, "dq, workers sharing a group, " + how);
      expect_bit_identical(shared.dk, naive.dk, "dk, workers sharing a group, " + how);
      expect_bit_identical(shared.dv, naive.dv, "dv, workers sharing a group, " + how);
    }
  }
}

constexpr CausalAlign kTopLeft = CausalAlign::top_left;
constexpr CausalAlign kBottomRight = CausalAlign::bottom_right;

std::vector<Form> forms() {
  return {
      Form("bool_mask").masked(MaskKind::full),
      Form("bool_mask_key_padding_gqa_h4_hk2")
          .dims(3, 4, 2, 17, 33, 16)
          .masked(MaskKind::key_padding),
      Form("additive_bias").biased(BiasKind::normal),
      Form("finfo_min_bias_some_keys").biased(BiasKind::finfo_min_keys),
      Form("finfo_min_row").biased(BiasKind::finfo_min_rows),
      // masked_fill(~mask, finfo(fp64).min): the fill replaces the score, no gradient reaches
      // q.k there (SDPA's float mask would add it: finfo_min_row is that form).
      Form("finfo_min_fill_fully_masked_rows")
          .masked(MaskKind::full, true)
          .fill(MaskFill::finfo_min)
          .not_sdpa("SDPA takes a finite fill only as a float mask, added to the scores"),
      Form("neg_inf_bias_some_keys").biased(BiasKind::neg_inf_keys),
      Form("neg_inf_bias_row_safe").biased(BiasKind::neg_inf_rows).fill(MaskFill::safe),
      Form("neg_inf_fill_fully_masked_rows_nan")
          .masked(MaskKind::full, true)
          .not_sdpa("SDPA (_safe_softmax, flash) gives 0, not NaN, for a fully masked row"),
      Form("causal_top_left_sq17_sk33").causal(kTopLeft),
      Form("causal_top_left_sq33_sk17").dims(1, 2, 2, 33, 17, 16).causal(kTopLeft),
      Form("causal_bottom_right_sq17_sk33").causal(kBottomRight),
      Form("causal_bottom_right_sq33_sk17_safe_empty_rows")
          .dims(1, 2, 2, 33, 17, 16)
          .causal(kBottomRight)
          .fill(MaskFill::safe),
      Form("gqa_h4_hk1_causal_bias")
          .dims(2, 4, 1, 33, 33, 16)
          .causal(kTopLeft)
          .biased(BiasKind::normal),
      Form("safe_fully_masked_rows").masked(MaskKind::full, true).fill(MaskFill::safe),
      Form("safe_fully_masked_rows_nan_v_at_masked_keys")
          .dims(2, 2, 1, 17, 33, 16)
          .masked(MaskKind::key_padding, true)
          .fill(MaskFill::safe)
          .nan_v(),
      // masked_fill keeps a NaN q.k of a hidden key out of S (only dQ = dS K sees it); SDPA adds
      // its -inf mask, NaN + -inf = NaN, and poisons the whole row.
      Form("nan_k_at_masked_keys")
          .dims(2, 2, 1, 17, 33, 16)
          .masked(MaskKind::key_padding)
          .nan_k()
          .not_sdpa("SDPA adds the -inf mask, so a NaN key it hides still poisons the row"),
      // Longer than one key tile (128 keys) and one block of query rows (64) of the streamed
      // forward; a finite fill on rows that hide every key weighs the causal tail too.
      Form("causal_top_left_sq150_sk300").dims(1, 2, 1, 150, 300, 16).causal(kTopLeft),
      Form("causal_bottom_right_sq300_sk150_safe")
          .dims(1, 2, 1, 300, 150, 16)
          .causal(kBottomRight)
          .fill(MaskFill::safe),
      Form("causal_finfo_min_fill_fully_masked_rows_sq150_sk300")
          .dims(1, 2, 1, 150, 300, 16)
          .causal(kTopLeft)
          .masked(MaskKind::full, true)
          .fill(MaskFill::finfo_min)
          .not_sdpa("SDPA takes a finite fill only as a float mask, added to the scores"),
      // Head dims and key counts that are no multiple of a vector (tails of every loop), a
      // softcap, more key tiles (64 keys) than one.
      Form("softcap_causal_gqa_d13_sk150")
          .dims(1, 4, 2, 70, 150, 13)
          .causal(kBottomRight)
          .softcap(2.0),
      Form("dropout_keep_mask_bias").biased(BiasKind::normal).dropout(0.2),
      Form("dropout_keep_mask_gqa_causal_bottom_right")
          .dims(1, 4, 2, 17, 33, 16)
          .causal(kBottomRight)
          .dropout(0.1),
  };
}

INSTANTIATE_TEST_SUITE_P(Forms, MaskForm, ::testing::ValuesIn(forms()),
                         [](const ::testing::TestParamInfo<Form>& info) {
                           return info.param.name;
                         });

// PyTorch's CPU flash backward on a row whose every key carries finfo(fp32).min: LSE = m
// absorbs log Sk, P = 1 per key, so the row's dQ is Sk times eager autograd's.
TEST(MaskForms, reference_from_lse_finfo_min_row_dq_is_sk_times_saved) {
  const Form f = Form("finfo_min_row").biased(BiasKind::finfo_min_rows);
  const CaseInputs saved = make_inputs(f);
  Form lse_form = f;
  lse_form.p.backward_p = BackwardP::from_lse;
  const CaseInputs from_lse = make_inputs(lse_form);
  const Outputs a = of(reference_attention(saved.params, saved.q.data(), saved.k.data(),
                                           saved.v.data(), saved.dout.data()));
  const Outputs b = of(reference_attention(from_lse.params, from_lse.q.data(), from_lse.k.data(),
                                           from_lse.v.data(), from_lse.dout.data()));
  const int64_t D = f.p.head_dim, Sk = f.p.seqlen_k;
  for (int64_t row = 0; row < f.p.heads * f.p.seqlen_q; ++row) {
    const double factor = row % f.p.seqlen_q % 5 == 0 ? static_cast<double>(Sk) : 1.0;
    for (int64_t c = 0; c < D; ++c) {
      const double want = factor * a.dq[row * D + c];
      EXPECT_NEAR(b.dq[row * D + c], want, 1e-12 * std::max(1.0, std::abs(want))) << row;
    }
  }
}

}  // namespace
}  // namespace attnscope
