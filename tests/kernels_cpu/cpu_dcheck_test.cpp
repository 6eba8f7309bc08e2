// Built only with ATTNSCOPE_KERNEL_DCHECKS (the ASan + UBSan build): a kernel stage called
// against its contract stops at its ATTNSCOPE_DCHECK with the condition and its place, instead
// of reading through a null operand; a call that keeps the contract runs as usual.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/tile_math.h"

namespace attnscope::test {
namespace {

TEST(KernelDcheck, a_broken_contract_aborts_naming_the_condition) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(cpu::transpose(2, 3, nullptr, 3, nullptr, 2),
               "transpose.cpp:[0-9]+: ATTNSCOPE_DCHECK failed: rows == 0 \\|\\| cols == 0");
  const auto narrowSource = [] {
    std::vector<float> src(6);
    std::vector<float> dst(6);
    cpu::transpose(2, 3, src.data(), 2, dst.data(), 2);  // ld_src < cols
  };
  EXPECT_DEATH(narrowSource(), "ATTNSCOPE_DCHECK failed: rows >= 0 && cols >= 0 && ld_src >= cols");
  const std::vector<float> src = {1, 2, 3, 4, 5, 6};  // [2 x 3]
  std::vector<float> dst(6);
  cpu::transpose(2, 3, src.data(), 3, dst.data(), 2);
  EXPECT_EQ(dst, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

}  // namespace
}  // namespace attnscope::test
