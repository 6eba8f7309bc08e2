// Deterministic harness cases, the cached oracle per case and the accuracy rule.
#include "variant_harness_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>

#include "kernels/precision.h"
#include "kernels/reference/reference_attention.h"

namespace attnscope::test {
namespace {

// Uniform in [lo, hi) from the raw mt19937 stream, rounded to the precision (kept as drawn
// at fp64).
class Source {
 public:
  Source(uint32_t seed, Precision p) : gen_(seed), p_(p) {}

  double next(double lo, double hi) {
    const double x = lo + (hi - lo) * (static_cast<double>(gen_() >> 8) / 16777216.0);
    return p_ == Precision::f64 ? x : round_to(p_, static_cast<float>(x));
  }
  std::vector<double> vec(int64_t n, double amplitude) {
    std::vector<double> out(static_cast<size_t>(n));
    for (double& x : out) x = next(-amplitude, amplitude);
    return out;
  }

 private:
  std::mt19937 gen_;
  Precision p_;
};

uint32_t seed_of(const std::string& name) {
  uint32_t h = 2166136261u;  // FNV-1a: stable across standard libraries
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 16777619u;
  return h;
}

VariantOutputs reference_of(const HarnessInputs& in) {
  const ReferenceTrace t =
      reference_attention(in.params, in.q.data(), in.k.data(), in.v.data(), in.dout.data());
  return {t.o, t.lse, t.dq, t.dk, t.dv};
}

constexpr CausalAlign kBottomRight = CausalAlign::bottom_right;

HarnessCase shape(std::string name, int64_t sq, int64_t sk, int64_t d) {
  HarnessCase c;
  c.name = std::move(name);
  c.sq = sq;
  c.sk = sk;
  c.d = d;
  return c;
}

HarnessCase heads(HarnessCase c, int64_t b, int64_t h, int64_t hk) {
  c.batch = b;
  c.heads = h;
  c.kv_heads = hk;
  return c;
}

HarnessCase causal(HarnessCase c, CausalAlign align = CausalAlign::top_left) {
  c.causal = true;
  c.align = align;
  return c;
}

HarnessCase masked(HarnessCase c, HarnessMask mask, bool bias = false) {
  c.mask = mask;
  c.bias = bias;
  return c;
}

}  // namespace

// Seqlen {1, 17, 97, 128, 1025 (small D, B*H = 1)} x head_dim {16, 32, 59, 64, 111, 128},
// sampled so that every value, Sq != Sk both ways, both causal alignments, GQA / MQA, each
// mask kind, bias, Dv != D and softcap appear; each shape runs at every precision.
std::vector<HarnessCase> harness_shapes() {
  using M = HarnessMask;
  HarnessCase softcap = shape("softcap_d64_s97", 97, 97, 64);
  softcap.softcap = 5;
  HarnessCase dv_differs = shape("dv32_d64_s97", 97, 97, 64);
  dv_differs.dv = 32;
  return {
      heads(shape("s1_d16", 1, 1, 16), 1, 2, 2),
      shape("sq1_sk17_d32", 1, 17, 32),
      heads(shape("s17_d59", 17, 17, 59), 2, 2, 2),
      heads(shape("s97_d64", 97, 97, 64), 1, 2, 2),
      heads(shape("s128_d128", 128, 128, 128), 1, 2, 2),
      heads(causal(shape("causal_d59_s97", 97, 97, 59)), 1, 2, 2),
      causal(shape("causal_d128_s128", 128, 128, 128)),
      causal(shape("causal_tl_d111_sq17_sk97", 17, 97, 111)),
      causal(shape("causal_tl_d32_sq97_sk17", 97, 17, 32)),
      causal(shape("causal_br_d64_sq17_sk97", 17, 97, 64), kBottomRight),
      causal(shape("causal_br_d32_sq97_sk128", 97, 128, 32), kBottomRight),
      heads(shape("gqa_h4_hk2_d64_sq97_sk128", 97, 128, 64), 2, 4, 2),
      heads(causal(shape("gqa_h4_hk2_causal_d59_sq17_sk97", 17, 97, 59)), 1, 4, 2),
      heads(causal(shape("mqa_h4_hk1_causal_d32_s97", 97, 97, 32)), 1, 4, 1),
      heads(masked(shape("bool_mask_d59_sq97_sk17", 97, 17, 59), M::full), 2, 2, 1),
      masked(shape("bool_mask_bias_d128_s128", 128, 128, 128), M::full, true),
      heads(masked(shape("key_padding_d64_s128", 128, 128, 64), M::key_padding), 3, 2, 2),
      heads(masked(shape("bias_d111_s97", 97, 97, 111), M::none, true), 1, 2, 2),
      causal(masked(shape("mask_bias_causal_d16_sq128_sk97", 128, 97, 16), M::broadcast, true)),
      heads(masked(shape("gqa_bias_key_padding_d111_s17", 17, 17, 111), M::key_padding, true), 2, 4,
            2),
      shape("s1025_d16", 1025, 1025, 16),
      causal(shape("causal_s1025_d16", 1025, 1025, 16)),
      shape("sq97_sk1025_d16", 97, 1025, 16),
      causal(shape("causal_br_d16_sq17_sk1025", 17, 1025, 16), kBottomRight),
      dv_differs,
      softcap,
  };
}

HarnessCase at_precision(HarnessCase c, Precision p) {
  c.precision = p;
  c.name += p == Precision::f64   ? "_f64"
            : p == Precision::f32 ? "_f32"
            : p == Precision::f16 ? "_f16"
                                  : "_bf16";
  return c;
}

std::unique_ptr<HarnessInputs> make_inputs(const HarnessCase& c) {
  auto in = std::make_unique<HarnessInputs>();
  in->config = c;
  HarnessCase& g = in->config;
  if (g.dv == 0) g.dv = g.d;
  Source src(seed_of(g.name), g.precision);
  in->q = src.vec(g.batch * g.heads * g.sq * g.d, 2.0);
  in->k = src.vec(g.batch * g.kv_heads * g.sk * g.d, 2.0);
  in->v = src.vec(g.batch * g.kv_heads * g.sk * g.dv, 1.0);
  in->dout = src.vec(g.batch * g.heads * g.sq * g.dv, 1.0);

  AttnParams& p = in->params;
  p.batch = g.batch;
  p.heads = g.heads;
  p.kv_heads = g.kv_heads;
  p.seqlen_q = g.sq;
  p.seqlen_k = g.sk;
  p.head_dim = g.d;
  p.head_dim_v = g.dv;
  p.scale = 1.0 / std::sqrt(static_cast<double>(g.d));
  p.softcap = g.softcap;
  p.causal = g.causal;
  p.causal_align = g.align;
  p.precision = g.precision;

  switch (g.mask) {
    case HarnessMask::none:
      break;
    case HarnessMask::full:
      p.mask_strides = {g.heads * g.sq * g.sk, g.sq * g.sk, g.sk, 1};
      break;
    case HarnessMask::broadcast:
      p.mask_strides = {0, 0, g.sk, 1};
      break;
    case HarnessMask::key_padding:
      p.mask_strides = {g.sk, 0, 0, 1};
      break;
  }
  if (g.mask == HarnessMask::key_padding) {  // batch b keeps its first max(1, Sk - 3b) keys
    in->mask.assign(static_cast<size_t>(g.batch * g.sk), 1);
    for (int64_t b = 0; b < g.batch; ++b) {
      for (int64_t j = std::max<int64_t>(1, g.sk - 3 * b); j < g.sk; ++j)
        in->mask[b * g.sk + j] = 0;
    }
  } else if (g.mask != HarnessMask::none) {  // ~25 % hidden, key 0 always visible
    const int64_t n = g.mask == HarnessMask::full ? g.batch * g.heads * g.sq * g.sk : g.sq * g.sk;
    in->mask.resize(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) in->mask[e] = e % g.sk == 0 || src.next(0, 1) >= 0.25;
  }
  if (g.bias) {
    in->bias = src.vec(g.heads * g.sq * g.sk, 1.0);
    p.bias_strides = {0, g.sq * g.sk, g.sk, 1};
  }
  p.mask = in->mask.empty() ? nullptr : in->mask.data();
  p.bias = in->bias.empty() ? nullptr : in->bias.data();
  return in;
}

const Oracle& oracle_for(const HarnessCase& c) {
  static std::mutex mu;
  static std::map<std::string, Oracle> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(c.name);
  if (it != cache.end()) return it->second;
  Oracle o;
  o.inputs = make_inputs(c);
  o.reference = reference_of(*o.inputs);
  if (c.precision == Precision::f16 || c.precision == Precision::bf16) {
    const KernelVariant* unfused = find_variant("cpu-unfused");
    Result<VariantOutputs> r =
        run_variant(*unfused, o.inputs->params, {c.precision, Mode::unfused, 2}, o.inputs->view());
    if (!r) throw std::runtime_error("cpu-unfused baseline: " + r.error().describe());
    o.unfused = std::move(r.value());
  }
  return cache.emplace(c.name, std::move(o)).first->second;
}

double max_abs_error(const std::vector<double>& got, const std::vector<double>& ref) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (got.size() != ref.size()) return kInf;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(ref[i])) continue;
    const double err = std::abs(got[i] - ref[i]);
    worst = std::isfinite(err) ? std::max(worst, err) : kInf;
  }
  return worst;
}

double max_abs(const std::vector<double>& x) {
  double worst = 0;
  for (double e : x) {
    if (std::isfinite(e)) worst = std::max(worst, std::abs(e));
  }
  return worst;
}

double accuracy_bound(Precision p, double factor, const std::vector<double>& ref,
                      const std::vector<double>& unfused) {
  const double scale = max_abs(ref);
  switch (p) {
    case Precision::f64:
      return 1e-12 * scale + 1e-14;
    case Precision::f32:
      return 1e-5 * scale + 1e-6;
    case Precision::f16:
    case Precision::bf16:
      break;
  }
  return factor * max_abs_error(unfused, ref) + 1e-5 * scale + 1e-6;
}

}  // namespace attnscope::test
