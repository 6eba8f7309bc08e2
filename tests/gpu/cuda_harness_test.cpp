// The registry harness over the GPU variants (label gpu): every CUDA variant on the shape grid
// of tests/core (tile-breaking sizes, GQA, masks, bias, both causal alignments, softcap) at
// fp32, fp16 and bf16, checked against the fp64 reference with DESIGN §3's accuracy rule; the
// own cuda-fused kernel also against the cpu-fused kernel at the same precision. Without a GPU
// the GPU variants are not registered and every case skips with "skipped: no GPU".
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/kernel_registry.h"
#include "kernels/cuda/cuda_attention.h"
#include "variant_harness_util.h"

namespace attnscope::test {
namespace {

// Registry names of the GPU variants (core/cuda_variants.h).
const std::vector<std::string>& gpu_variants() {
  static const std::vector<std::string> names = {"cuda-fused", "torch-cuda-flash",
                                                 "torch-cuda-efficient", "torch-cuda-cudnn"};
  return names;
}

struct GpuParam {
  std::string variant;
  HarnessCase c;
};

void PrintTo(const GpuParam& p, std::ostream* os) {
  *os << p.variant << " " << p.c.name;
}

std::vector<GpuParam> grid() {
  std::vector<GpuParam> g;
  for (const std::string& v : gpu_variants()) {
    for (Precision p : {Precision::f32, Precision::f16, Precision::bf16}) {
      for (const HarnessCase& c : harness_shapes()) g.push_back({v, at_precision(c, p)});
    }
  }
  return g;
}

std::string test_name(const ::testing::TestParamInfo<GpuParam>& info) {
  std::string name = info.param.variant + "_" + info.param.c.name;
  for (char& ch : name) ch = ch == '-' ? '_' : ch;
  return name;
}

class GpuHarness : public ::testing::TestWithParam<GpuParam> {
 protected:
  // max|got - ref| <= accuracy_bound(precision, factor, ref, unfused), recorded as a property.
  void check(const std::string& what, double factor, const std::vector<double>& got,
             const std::vector<double>& ref, const std::vector<double>& unfused) {
    const Precision p = GetParam().c.precision;
    ASSERT_EQ(got.size(), ref.size()) << what << ": wrong number of elements";
    const double err = max_abs_error(got, ref);
    const double bound = accuracy_bound(p, factor, ref, unfused);
    char text[64];
    std::snprintf(text, sizeof text, "%.3e <= %.3e", err, bound);
    RecordProperty("err_" + what, text);
    EXPECT_LE(err, bound) << what << " at " << precision_name(p) << ": max|err| " << err
                          << ", max|ref| " << max_abs(ref);
  }

  void check_all(const std::string& against, const VariantOutputs& got, const VariantOutputs& ref,
                 const VariantOutputs& unfused) {
    check(against + "_o", 2, got.o, ref.o, unfused.o);
    check(against + "_lse", 2, got.lse, ref.lse, unfused.lse);
    check(against + "_dq", 3, got.dq, ref.dq, unfused.dq);
    check(against + "_dk", 3, got.dk, ref.dk, unfused.dk);
    check(against + "_dv", 3, got.dv, ref.dv, unfused.dv);
  }
};

TEST_P(GpuHarness, matches_reference_and_cpu_kernel_within_accuracy_rule) {
  const GpuParam& param = GetParam();
  const KernelVariant* variant = find_variant(param.variant);
  if (variant == nullptr) {
    GTEST_SKIP() << "skipped: no GPU (" << cuda::device_description() << ")";
  }
  const HarnessCase& c = param.c;
  const std::unique_ptr<HarnessInputs> probe = make_inputs(c);
  const Support support = variant->supports(probe->params, c.precision, Mode::fused);
  if (!support) GTEST_SKIP() << support.reason;

  const Oracle& oracle = oracle_for(c);
  const RunConfig config{c.precision, Mode::fused, 2};
  const Result<VariantOutputs> got =
      run_variant(*variant, oracle.inputs->params, config, oracle.inputs->view());
  ASSERT_TRUE(got.ok()) << got.error().describe();
  check_all("ref", *got, oracle.reference, oracle.unfused);
  if (param.variant != "cuda-fused") return;
  const Result<VariantOutputs> cpu =
      run_variant(*find_variant("cpu-fused"), oracle.inputs->params, config, oracle.inputs->view());
  ASSERT_TRUE(cpu.ok()) << cpu.error().describe();
  check_all("cpu", *got, *cpu, oracle.unfused);
}

INSTANTIATE_TEST_SUITE_P(Grid, GpuHarness, ::testing::ValuesIn(grid()), test_name);

// Where a GPU exists, every GPU variant the registry lists is one this harness runs.
TEST(GpuHarnessCoverage, registered_gpu_variants_are_all_in_the_harness) {
  if (cuda::device_count() == 0)
    GTEST_SKIP() << "skipped: no GPU (" << cuda::device_description() << ")";
  std::vector<std::string> registered;
  for (const KernelVariant& v : kernel_variants()) {
    if (v.backend == "cuda" || v.backend == "torch-cuda") registered.push_back(v.name);
  }
  EXPECT_FALSE(registered.empty());
  for (const std::string& name : registered) {
    EXPECT_NE(std::find(gpu_variants().begin(), gpu_variants().end(), name), gpu_variants().end())
        << name << " is registered but not in gpu_variants()";
  }
}

}  // namespace
}  // namespace attnscope::test
