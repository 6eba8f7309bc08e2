// Test runs forced onto one instruction set of the CPU kernels (ATTNSCOPE_CPU_ISA, set by the
// CTest registrations named *_isa_<set>): on a CPU that lacks the set every test of the run is
// skipped, rather than the best set being tested under another set's name.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa.h"

namespace attnscope::test {

class ForcedCpuIsa : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* forced = std::getenv("ATTNSCOPE_CPU_ISA");
    if (forced == nullptr || *forced == '\0') return;
    const std::vector<std::string> available = cpu::cpu_isas_available();
    if (std::find(available.begin(), available.end(), forced) == available.end()) {
      GTEST_SKIP() << "ATTNSCOPE_CPU_ISA=" << forced << " is not available on this CPU";
    }
  }
};

}  // namespace attnscope::test
