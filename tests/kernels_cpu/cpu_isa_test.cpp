// The CPU kernels' instruction sets (kernels/cpu/cpu_isa.h): what this CPU offers, the refusal
// of sets it lacks, the set ATTNSCOPE_CPU_ISA forces, and the same cases run under every
// available set: fp32 within 1e-5 of the fp64 reference, fp16 / bf16 within the low-precision
// rule (fused error <= 2x unfused error + 1e-6, 3x for gradients), and on every set the same
// non-finite positions and the same provenance of each non-finite output as on the best set;
// avx512bf16 takes the fused bf16 matmuls alone, and keeps dS exactly 0 where a row sees one key;
// under an emulated CPU model, the sets detected are the ones that model offers.
#include "kernels/cpu/cpu_isa.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/attn_names.h"
#include "kernels/cpu/forward_stages.h"

namespace attnscope::test {
namespace {

using cpu::cpu_isa;
using cpu::cpu_isas_available;
using cpu::cpu_isas_built;
using cpu::select_cpu_isa;

constexpr float kInfinity = std::numeric_limits<float>::infinity();

// Runs the body under one set, restoring the set in use afterwards.
class ScopedIsa {
 public:
  explicit ScopedIsa(const std::string& name) : before_(cpu_isa()) {
    std::string error;
    ok_ = select_cpu_isa(name, &error);
    EXPECT_TRUE(ok_) << error;
  }
  ~ScopedIsa() {
    std::string error;
    EXPECT_TRUE(select_cpu_isa(before_, &error)) << error;
  }
  bool ok() const { return ok_; }

 private:
  std::string before_;
  bool ok_ = false;
};

TEST(CpuIsa, available_sets_are_built_sets_best_first_ending_in_sse2) {
  const std::vector<std::string> built = cpu_isas_built(), available = cpu_isas_available();
  ASSERT_FALSE(available.empty());
  EXPECT_EQ(available.back(), "sse2");
  EXPECT_EQ(built.back(), "sse2");
  // available is built with the sets this CPU lacks left out, order kept.
  std::vector<std::string> kept;
  std::copy_if(built.begin(), built.end(), std::back_inserter(kept), [&](const std::string& b) {
    return std::find(available.begin(), available.end(), b) != available.end();
  });
  EXPECT_EQ(kept, available);
  for (const char* name : {"avx2", "sse4", "sse2"}) {
    EXPECT_NE(std::find(built.begin(), built.end(), name), built.end()) << name;
  }
}

TEST(CpuIsa, set_in_use_is_the_forced_one_or_the_best) {
  const char* forced = std::getenv("ATTNSCOPE_CPU_ISA");
  const std::vector<std::string> available = cpu_isas_available();
  if (forced == nullptr || *forced == '\0') {
    EXPECT_EQ(cpu_isa(), available.front());
  } else if (std::find(available.begin(), available.end(), forced) != available.end()) {
    EXPECT_EQ(cpu_isa(), forced);
  } else {
    GTEST_SKIP() << "ATTNSCOPE_CPU_ISA=" << forced << " is not available on this CPU";
  }
}

// Under an emulated CPU (qemu-x86_64 -cpu MODEL, tests/kernels_cpu/CMakeLists.txt),
// ATTNSCOPE_EXPECT_CPU_ISAS lists the sets that CPU model offers, best first, comma-separated:
// the detection must find exactly those.
TEST(CpuIsa, available_sets_are_the_ones_the_cpu_model_offers) {
  const char* expected = std::getenv("ATTNSCOPE_EXPECT_CPU_ISAS");
  if (expected == nullptr) GTEST_SKIP() << "ATTNSCOPE_EXPECT_CPU_ISAS is set under emulated CPUs";
  std::string available;
  for (const std::string& name : cpu_isas_available()) {
    available += (available.empty() ? "" : ",") + name;
  }
  EXPECT_EQ(available, expected);
}

TEST(CpuIsa, unknown_and_unavailable_sets_are_refused_naming_the_available_ones) {
  const std::string before = cpu_isa();
  std::string error;
  EXPECT_FALSE(select_cpu_isa("avx1024", &error));
  EXPECT_NE(error.find("unknown instruction set 'avx1024'"), std::string::npos) << error;
  EXPECT_NE(error.find("available here: "), std::string::npos) << error;
  EXPECT_NE(error.find("sse2"), std::string::npos) << error;
  const std::vector<std::string> available = cpu_isas_available();
  for (const std::string& built : cpu_isas_built()) {
    if (std::find(available.begin(), available.end(), built) != available.end()) continue;
    error.clear();
    EXPECT_FALSE(select_cpu_isa(built, &error));
    EXPECT_NE(error.find("this CPU cannot run the instruction set '" + built + "'"),
              std::string::npos)
        << error;
  }
  EXPECT_EQ(cpu_isa(), before) << "a refused selection changes nothing";
}

// What one set computes for a case: fused and unfused results and the fused trace.
struct IsaRun {
  std::string isa;
  CpuAttnResult fused, unfused;
  CpuTrace trace;
};

std::vector<IsaRun> run_every_set(const TestCase& c) {
  std::vector<IsaRun> runs;
  for (const std::string& isa : cpu_isas_available()) {
    ScopedIsa scoped(isa);
    if (!scoped.ok()) continue;
    EXPECT_EQ(cpu_isa(), isa);
    IsaRun run;
    run.isa = isa;
    run.fused = run_cpu_traced(c, Mode::fused, &run.trace);
    run.unfused = run_cpu(c, Mode::unfused);
    runs.push_back(std::move(run));
  }
  return runs;
}

// Non-finite class of every element: 0 finite, 1 NaN, 2 +inf, 3 -inf.
std::vector<int> classes(const std::vector<float>& x) {
  std::vector<int> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    out[i] = x[i] != x[i] ? 1 : x[i] == kInfinity ? 2 : x[i] == -kInfinity ? 3 : 0;
  }
  return out;
}

struct Output {
  const char* name;
  const std::vector<float>& (*of)(const CpuAttnResult&);
  const std::vector<double>& (*ref)(const ReferenceTrace&);
  double low_precision_factor;  // fused error <= factor x unfused error + 1e-6
};

const Output kOutputs[] = {
    {"o", [](const CpuAttnResult& r) -> const std::vector<float>& { return r.o; },
     [](const ReferenceTrace& t) -> const std::vector<double>& { return t.o; }, 2},
    {"lse", [](const CpuAttnResult& r) -> const std::vector<float>& { return r.lse; },
     [](const ReferenceTrace& t) -> const std::vector<double>& { return t.lse; }, 2},
    {"dq", [](const CpuAttnResult& r) -> const std::vector<float>& { return r.dq; },
     [](const ReferenceTrace& t) -> const std::vector<double>& { return t.dq; }, 3},
    {"dk", [](const CpuAttnResult& r) -> const std::vector<float>& { return r.dk; },
     [](const ReferenceTrace& t) -> const std::vector<double>& { return t.dk; }, 3},
    {"dv", [](const CpuAttnResult& r) -> const std::vector<float>& { return r.dv; },
     [](const ReferenceTrace& t) -> const std::vector<double>& { return t.dv; }, 3},
};

// accuracy: also the accuracy rule (off for crafted overflows, where the unfused emulation is
// meant to break and the rule's yardstick with it).
void expect_same_on_every_set(const TestCase& c, bool accuracy) {
  const ReferenceTrace ref = run_reference(c);
  const std::vector<IsaRun> runs = run_every_set(c);
  ASSERT_FALSE(runs.empty());
  const IsaRun& best = runs.front();
  for (const IsaRun& run : runs) {
    SCOPED_TRACE(c.config.name + " on " + run.isa);
    for (const Output& out : kOutputs) {
      const std::vector<float>& fused = out.of(run.fused);
      const std::vector<double>& r = out.ref(ref);
      const double scale = std::max(max_abs(r), 1e-30);
      if (accuracy && c.config.precision == Precision::f32) {
        EXPECT_LE(max_abs_diff(fused, r) / scale, 1e-5) << out.name;
      } else if (accuracy) {
        EXPECT_LE(max_abs_diff(fused, r),
                  out.low_precision_factor * max_abs_diff(out.of(run.unfused), r) + 1e-6)
            << out.name;
      }
      EXPECT_EQ(classes(fused), classes(out.of(best.fused))) << out.name << " vs " << best.isa;
      EXPECT_EQ(classes(out.of(run.unfused)), classes(out.of(best.unfused)))
          << out.name << " unfused vs " << best.isa;
    }
    EXPECT_EQ(run.trace.forward.o_provenance, best.trace.forward.o_provenance);
    EXPECT_EQ(run.trace.forward.lse_provenance, best.trace.forward.lse_provenance);
    EXPECT_EQ(run.trace.backward.dq_provenance, best.trace.backward.dq_provenance);
    EXPECT_EQ(run.trace.backward.dk_provenance, best.trace.backward.dk_provenance);
    EXPECT_EQ(run.trace.backward.dv_provenance, best.trace.backward.dv_provenance);
  }
}

TEST(CpuIsa, every_set_same_nan_positions_and_provenance_f32_within_1e5) {
  TestCase c = messy_pooling_case(Precision::f32);
  c.config.name = "messy_f32";
  expect_same_on_every_set(c, true);
}

TEST(CpuIsa, every_set_same_nan_positions_and_provenance_bf16_within_rule) {
  TestCase c = messy_pooling_case(Precision::bf16);
  c.config.name = "messy_bf16";
  expect_same_on_every_set(c, true);
}

TEST(CpuIsa, every_set_same_overflow_and_masked_row_f16) {
  TestCase overflow = qk_overflow_case(Precision::f16);
  overflow.config.name = "qk_overflow_f16";
  expect_same_on_every_set(overflow, false);
  TestCase masked = fully_masked_row_case(MaskFill::neg_inf, Precision::f16);
  masked.config.name = "fully_masked_row_f16";
  expect_same_on_every_set(masked, true);
}

TEST(CpuIsa, avx512bf16_sends_fused_bf16_matmuls_to_dot_products_and_nothing_else) {
  const std::vector<std::string> available = cpu_isas_available();
  AttnParams prm;
  prm.precision = Precision::bf16;
  for (const std::string& isa : available) {
    ScopedIsa scoped(isa);
    const bool bf16_set = isa == "avx512bf16";
    EXPECT_EQ(cpu::bf16_dot_products(), bf16_set) << isa;
    for (const Precision p : {Precision::f32, Precision::f16, Precision::bf16}) {
      prm.precision = p;
      EXPECT_EQ(cpu::make_head_context(prm, Mode::fused, 0, 0).bf16_dot,
                bf16_set && p == Precision::bf16)
          << isa << " " << precision_name(p);
      EXPECT_FALSE(cpu::make_head_context(prm, Mode::unfused, 0, 0).bf16_dot) << isa;
    }
  }
}

TEST(CpuIsa, every_set_zero_dq_on_rows_with_one_visible_key_bf16) {
  // Causal row 0 sees key 0 alone: P = 1, O = V_0, so dS = P (dP - D) must vanish exactly,
  // which needs D = dO . O summed as the dP matmul sums (dot_bf16 under avx512bf16).
  CaseConfig config;
  config.name = "causal_first_row_bf16";
  config.heads = 4;
  config.sq = config.sk = 70;
  config.d = 59;
  config.causal = true;
  config.precision = Precision::bf16;
  TestCase c = make_case(config);
  // dO spread over 2^18 (powers of two keep it bf16): products of 16 significant bits then no
  // longer sum exactly in fp32, so the order of the sum shows.
  for (size_t i = 0; i < c.dout.size(); ++i) c.dout[i] = std::ldexp(c.dout[i], 3 * (i % 7));
  for (const std::string& isa : cpu_isas_available()) {
    ScopedIsa scoped(isa);
    const CpuAttnResult r = run_cpu(c, Mode::fused);
    for (int64_t h = 0; h < config.heads; ++h) {
      for (int64_t e = 0; e < config.d; ++e) {
        ASSERT_EQ(r.dq[static_cast<size_t>(h * config.sq * config.d + e)], 0.0f)
            << isa << " head " << h << " dim " << e;
      }
    }
  }
}

}  // namespace
}  // namespace attnscope::test
