// Random attention cases and comparison helpers for the CPU kernel tests.
#include "cpu_test_util.h"

#include <cmath>
#include <limits>
#include <random>

#include "forced_cpu_isa.h"
#include "kernels/precision.h"

namespace attnscope::test {
namespace {

::testing::Environment* const kForcedCpuIsa = ::testing::AddGlobalTestEnvironment(new ForcedCpuIsa);

// Uniform in [lo, hi) from the raw mt19937 stream (portable across standard libraries).
double uniform(std::mt19937& gen, double lo, double hi) {
  return lo + (hi - lo) * (static_cast<double>(gen() >> 8) / 16777216.0);
}

std::vector<float> random_tensor(std::mt19937& gen, int64_t n, double amplitude, Precision p) {
  std::vector<float> x(static_cast<size_t>(n));
  for (float& e : x) e = round_to(p, static_cast<float>(uniform(gen, -amplitude, amplitude)));
  return x;
}

enum class Cls { finite, nan, pos_inf, neg_inf };

Cls classify(double x) {
  if (std::isnan(x)) return Cls::nan;
  if (std::isinf(x)) return x > 0 ? Cls::pos_inf : Cls::neg_inf;
  return Cls::finite;
}

}  // namespace

TestCase make_case(const CaseConfig& config) {
  TestCase c;
  c.config = config;
  CaseConfig& g = c.config;
  if (g.dv == 0) g.dv = g.d;
  std::mt19937 gen(g.seed);
  const Precision p = g.precision;
  c.q = random_tensor(gen, g.batch * g.heads * g.sq * g.d, 2.0, p);
  c.k = random_tensor(gen, g.batch * g.kv_heads * g.sk * g.d, 2.0, p);
  c.v = random_tensor(gen, g.batch * g.kv_heads * g.sk * g.dv, 1.0, p);
  c.dout = random_tensor(gen, g.batch * g.heads * g.sq * g.dv, 1.0, p);
  int64_t mask_n = 0;
  switch (g.mask) {
    case MaskKind::none:
      break;
    case MaskKind::full:
      mask_n = g.batch * g.heads * g.sq * g.sk;
      c.mask_strides = {g.heads * g.sq * g.sk, g.sq * g.sk, g.sk, 1};
      break;
    case MaskKind::broadcast:
      mask_n = g.sq * g.sk;
      c.mask_strides = {0, 0, g.sk, 1};
      break;
    case MaskKind::key_padding:
      mask_n = g.batch * g.sk;
      c.mask_strides = {g.sk, 0, 0, 1};
      break;
  }
  c.mask.resize(static_cast<size_t>(mask_n));
  for (uint8_t& m : c.mask) m = uniform(gen, 0, 1) < 0.75 ? 1 : 0;
  if (g.bias) {
    c.bias.resize(static_cast<size_t>(g.heads * g.sq * g.sk));
    c.bias_strides = {0, g.sq * g.sk, g.sk, 1};
    for (double& b : c.bias) {
      b = round_to(p, static_cast<float>(uniform(gen, -2, 2)));
      if (g.bias_neg_inf && uniform(gen, 0, 1) < 0.1) b = -std::numeric_limits<double>::infinity();
    }
  }
  if (g.dropout) add_dropout(c, g.dropout_p, g.dropout_broadcast, g.seed * 7919u + 13u);
  return c;
}

void add_dropout(TestCase& c, double p, bool broadcast, uint32_t seed) {
  CaseConfig& g = c.config;
  g.dropout = true;
  g.dropout_p = p;
  g.dropout_broadcast = broadcast;
  const int64_t per_batch = g.heads * g.sq * g.sk;
  c.keep.resize(static_cast<size_t>(broadcast ? per_batch : g.batch * per_batch));
  c.keep_strides = {broadcast ? 0 : per_batch, g.sq * g.sk, g.sk, 1};
  std::mt19937 gen(seed);
  for (uint8_t& k : c.keep) k = uniform(gen, 0, 1) < p ? 0 : 1;
}

AttnParams params_of(const TestCase& c) {
  const CaseConfig& g = c.config;
  AttnParams p;
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
  p.mask_fill = g.fill;
  p.precision = g.precision;
  if (!c.mask.empty()) {
    p.mask = c.mask.data();
    p.mask_strides = c.mask_strides;
  }
  if (!c.bias.empty()) {
    p.bias = c.bias.data();
    p.bias_strides = c.bias_strides;
  }
  if (!c.keep.empty()) {
    p.dropout_keep = c.keep.data();
    p.dropout_strides = c.keep_strides;
    p.dropout_p = g.dropout_p;
  }
  p.backward_p = g.backward_p;
  return p;
}

ReferenceTrace run_reference(const TestCase& c) {
  const auto widen = [](const std::vector<float>& x) {
    return std::vector<double>(x.begin(), x.end());
  };
  const std::vector<double> q = widen(c.q), k = widen(c.k), v = widen(c.v), dout = widen(c.dout);
  return reference_attention(params_of(c), q.data(), k.data(), v.data(), dout.data());
}

CpuAttnResult run_cpu(const TestCase& c, Mode mode, int threads) {
  return run_cpu_traced(c, mode, nullptr, threads);
}

CpuAttnResult run_cpu_traced(const TestCase& c, Mode mode, CpuTrace* trace, int threads) {
  CpuAttnOptions options;
  options.mode = mode;
  options.threads = threads;
  options.trace = trace;
  return cpu_attention(params_of(c), options, inputs_of(c));
}

CpuAttnInputs inputs_of(const TestCase& c) {
  return {c.q.data(), c.k.data(), c.v.data(), c.dout.data()};
}

TestCase fully_masked_row_case(MaskFill fill, Precision precision) {
  CaseConfig c;
  c.sq = 17;
  c.sk = 97;
  c.d = 32;
  c.mask = MaskKind::full;
  c.fill = fill;
  c.precision = precision;
  TestCase t = make_case(c);
  for (int64_t i = 0; i < c.sq; ++i) {
    for (int64_t j = 0; j < c.sk; ++j) {
      uint8_t& m = t.mask[static_cast<size_t>(i * c.sk + j)];
      if (i == kMaskedRow) m = 0;
      if (i != kMaskedRow && j == i) m = 1;
    }
  }
  return t;
}

TestCase qk_overflow_case(Precision precision) {
  CaseConfig c;
  c.sq = 4;
  c.sk = 8;
  c.d = 64;
  c.precision = precision;
  TestCase t = make_case(c);
  for (int64_t e = 0; e < c.d; ++e) {
    t.q[static_cast<size_t>(e)] = 40;
    t.k[static_cast<size_t>(e)] = 40;
  }
  return t;
}

double max_abs_diff(const std::vector<float>& got, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    if (std::isfinite(got[i]) && std::isfinite(ref[i])) {
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - ref[i]));
    }
  }
  return worst;
}

double max_abs(const std::vector<double>& ref) {
  double worst = 0;
  for (double x : ref) {
    if (std::isfinite(x)) worst = std::max(worst, std::abs(x));
  }
  return worst;
}

int64_t nonfinite_mismatches(const std::vector<float>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return -1;
  int64_t n = 0;
  for (size_t i = 0; i < got.size(); ++i) n += classify(got[i]) != classify(ref[i]);
  return n;
}

int64_t count_nonfinite(const std::vector<float>& x) {
  int64_t n = 0;
  for (float e : x) n += !std::isfinite(e);
  return n;
}

TestCase messy_pooling_case(Precision precision) {
  CaseConfig c;
  c.batch = 2;
  c.heads = 2;
  c.kv_heads = 1;
  c.sq = 150;
  c.sk = 200;
  c.d = 32;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.mask = MaskKind::broadcast;
  c.bias = true;
  c.bias_neg_inf = true;
  c.precision = precision;
  TestCase t = make_case(c);
  const int64_t bh = 1 * 2 + 1;  // batch 1, head 1
  t.q[static_cast<size_t>((bh * c.sq + 70) * c.d + 4)] = NAN;
  t.bias[static_cast<size_t>((1 * c.sq + 120) * c.sk + 30)] = NAN;
  return t;
}

DotRows dot_rows_of(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                    int64_t k) {
  DotRows d;
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t x = 0; x < n; ++x) {
      d.a_rows.insert(d.a_rows.end(), a.begin() + r * k, a.begin() + (r + 1) * k);
      for (int64_t t = 0; t < k; ++t) d.b_cols.push_back(b[static_cast<size_t>(t * n + x)]);
    }
  }
  return d;
}

}  // namespace attnscope::test
