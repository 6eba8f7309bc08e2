// One harness over every registered kernel variant: a sampled grid of tile-breaking shapes,
// precisions, causal alignments, GQA, masks and biases, each checked against the fp64
// reference on the rounded inputs with DESIGN §3's accuracy rule. Unsupported combinations
// are skipped with the variant's reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/kernel_registry.h"
#include "variant_harness_util.h"

namespace attnscope::test {
namespace {

// Every shape at fp64, fp32, fp16 and bf16; the name ends in the precision.
std::vector<HarnessCase> cases() {
  std::vector<HarnessCase> out;
  for (Precision p : {Precision::f64, Precision::f32, Precision::f16, Precision::bf16}) {
    for (const HarnessCase& c : harness_shapes()) out.push_back(at_precision(c, p));
  }
  return out;
}

struct HarnessParam {
  const KernelVariant* variant;
  Mode mode;
  HarnessCase c;
};

void PrintTo(const HarnessParam& p, std::ostream* os) {
  *os << p.variant->name << " " << mode_name(p.mode) << " " << p.c.name;
}

std::vector<HarnessParam> grid() {
  std::vector<HarnessParam> g;
  for (const KernelVariant& v : kernel_variants()) {
    const std::vector<Mode> modes = v.modes.empty() ? std::vector<Mode>{Mode::fused} : v.modes;
    for (Mode mode : modes) {
      for (const HarnessCase& c : cases()) g.push_back({&v, mode, c});
    }
  }
  return g;
}

// "torch-flash-cpu" -> "torch_flash_cpu" (gtest names allow no dashes).
std::string identifier(const std::string& variant_name) {
  std::string name = variant_name;
  for (char& ch : name) ch = ch == '-' ? '_' : ch;
  return name;
}

std::string test_name(const ::testing::TestParamInfo<HarnessParam>& info) {
  std::string name = identifier(info.param.variant->name);
  if (info.param.variant->modes.size() > 1) name += std::string("_") + mode_name(info.param.mode);
  return name + "_" + info.param.c.name;
}

class VariantHarness : public ::testing::TestWithParam<HarnessParam> {
 protected:
  // Checks one output against the rule and records the error and the bound.
  void check(const char* what, double factor, const std::vector<double>& got,
             const std::vector<double>& ref, const std::vector<double>& unfused) {
    const Precision p = GetParam().c.precision;
    ASSERT_EQ(got.size(), ref.size()) << what << ": wrong number of elements";
    const double err = max_abs_error(got, ref);
    const double bound = accuracy_bound(p, factor, ref, unfused);
    char text[64];
    std::snprintf(text, sizeof text, "%.3e <= %.3e", err, bound);
    RecordProperty(std::string("err_") + what, text);
    EXPECT_LE(err, bound) << what << " at " << precision_name(p) << ": max|err| " << err
                          << ", max|ref| " << max_abs(ref) << ", unfused same precision: "
                          << (unfused.empty() ? -1.0 : max_abs_error(unfused, ref));
  }
};

TEST_P(VariantHarness, matches_fp64_reference_within_accuracy_rule) {
  const HarnessParam& param = GetParam();
  const KernelVariant& variant = *param.variant;
  const HarnessCase& c = param.c;
  const std::unique_ptr<HarnessInputs> probe = make_inputs(c);
  const Support support = variant.supports(probe->params, c.precision, param.mode);
  if (!support) GTEST_SKIP() << support.reason;

  const Oracle& oracle = oracle_for(c);
  const RunConfig config{c.precision, param.mode, 2};
  const Result<VariantOutputs> got =
      run_variant(variant, oracle.inputs->params, config, oracle.inputs->view());
  ASSERT_TRUE(got.ok()) << got.error().describe();
  const VariantOutputs& ref = oracle.reference;
  check("o", 2, got->o, ref.o, oracle.unfused.o);
  check("lse", 2, got->lse, ref.lse, oracle.unfused.lse);
  check("dq", 3, got->dq, ref.dq, oracle.unfused.dq);
  check("dk", 3, got->dk, ref.dk, oracle.unfused.dk);
  check("dv", 3, got->dv, ref.dv, oracle.unfused.dv);
}

INSTANTIATE_TEST_SUITE_P(Grid, VariantHarness, ::testing::ValuesIn(grid()), test_name);

// CTest runs the harness once per variant (tests/core/CMakeLists.txt); a variant missing from
// that list would never be checked.
TEST(VariantHarnessCoverage, ctest_runs_every_registered_variant) {
  std::string expected;
  for (const KernelVariant& v : kernel_variants()) {
    if (v.backend == "cuda" || v.backend == "torch-cuda") continue;  // tests/gpu runs these
    expected += (expected.empty() ? "" : ",") + identifier(v.name);
  }
  EXPECT_EQ(std::string(ATTNSCOPE_HARNESS_VARIANTS), expected)
      << "add the new variant to ATTNSCOPE_HARNESS_VARIANTS in tests/core/CMakeLists.txt";
}

}  // namespace
}  // namespace attnscope::test
