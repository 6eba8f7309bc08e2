// main() of attnscope_variant_tests: pins LibTorch to its portable CPU kernels before any test
// runs (pin_torch_cpu_isa), so that the comparisons that count bit-identical elements against
// LibTorch (cpu-unfused vs torch-eager, torch-sdpa-math vs public SDPA) give the same counts on
// AVX2, AVX-512 and AMX machines. Our own kernels are not affected; a run forced onto one of
// their instruction sets skips where this CPU lacks it (forced_cpu_isa.h).
#include <gtest/gtest.h>

#include "core/torch_reference.h"
#include "tests/kernels_cpu/forced_cpu_isa.h"

namespace attnscope::test {
namespace {

// What the pin says it did: LibTorch's dispatch runs the DEFAULT (portable) kernels.
std::string& pinned_capability() {
  static std::string capability;
  return capability;
}

TEST(TorchIsaPin, libtorch_runs_its_portable_cpu_kernels) {
  EXPECT_EQ(pinned_capability(), "DEFAULT");
}

}  // namespace
}  // namespace attnscope::test

int main(int argc, char** argv) {
  attnscope::test::pinned_capability() = attnscope::pin_torch_cpu_isa();
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new attnscope::test::ForcedCpuIsa);
  return RUN_ALL_TESTS();
}
