// Selection of the CPU kernels' instruction set (see cpu_isa.h): Highway's target mask, plus
// the flag that sends bf16 matmuls to gemm_bf16.h ("avx512bf16"). This file is compiled with the
// same flags and HWY_DISABLED_TARGETS as tile_math.cpp, so HWY_TARGETS here lists exactly the
// sets built there.
#include "kernels/cpu/cpu_isa.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "hwy/highway.h"
#include "kernels/cpu/gemm_bf16.h"

namespace attnscope::cpu {
namespace {

// Highway's AVX-512 set with AVX512-BF16 dot products for bf16 matmuls (gemm_bf16.h).
const std::string kBf16Set = "avx512bf16";
#if HWY_ARCH_X86
constexpr bool kBf16SetBuilt = (HWY_TARGETS & HWY_AVX3) != 0;
#else
constexpr bool kBf16SetBuilt = false;
#endif
// The set in use is kBf16Set (Highway then runs its AVX-512 set).
std::atomic<bool> bf16_dot_in_use{false};

// One Highway target bit and its name here.
std::string name_of(int64_t target) {
  switch (target) {
#if HWY_ARCH_X86
    case HWY_AVX3:
      return "avx512";
    case HWY_AVX2:
      return "avx2";
    case HWY_SSE4:
      return "sse4";
    case HWY_EMU128:  // the portable path, built for the x86-64 baseline: EMU128 with
    case HWY_SCALAR:  // clang, SCALAR with GCC < 12.3 (where Highway deems EMU128 broken)
      return "sse2";
#endif
    default: {
      std::string name = hwy::TargetName(target);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return name;
    }
  }
}

// The targets of `mask` that were built, best (lowest bit) first.
std::vector<int64_t> built_targets_in(int64_t mask) {
  std::vector<int64_t> out;
  for (int64_t t = mask & HWY_TARGETS; t != 0; t &= t - 1) out.push_back(t & -t);
  return out;
}

std::vector<std::string> names_of(const std::vector<int64_t>& targets) {
  std::vector<std::string> out;
  for (int64_t t : targets) out.push_back(name_of(t));
  return out;
}

// What this CPU supports, read once before the first selection.
int64_t cpu_targets() {
  static const int64_t targets = [] {
    hwy::DisableTargets(0);
    return hwy::SupportedTargets();
  }();
  return targets;
}

// The built sets this CPU runs, best first.
std::vector<std::string> available_names() {
  std::vector<std::string> names = names_of(built_targets_in(cpu_targets()));
#if HWY_ARCH_X86
  if (kBf16SetBuilt && (cpu_targets() & HWY_AVX3) != 0 && cpu_has_avx512_bf16()) {
    names.insert(names.begin(), kBf16Set);
  }
#endif
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool apply(const std::string& name, std::string* error) {
  const std::vector<std::string> available = available_names();
  if (name == kBf16Set && !available.empty() && available.front() == kBf16Set) {
    bf16_dot_in_use = apply("avx512", error);
    return bf16_dot_in_use;
  }
  for (int64_t t : built_targets_in(cpu_targets())) {
    if (name_of(t) != name) continue;
    hwy::DisableTargets(HWY_TARGETS & (t - 1));  // every built set better than t
    bf16_dot_in_use = false;
    return true;
  }
  const std::vector<std::string> built = cpu_isas_built();
  bool known = false;
  for (const std::string& b : built) known = known || b == name;
  *error = known ? "this CPU cannot run the instruction set '" + name + "'"
                 : "unknown instruction set '" + name + "' (this build has " + joined(built) + ")";
  *error += "; available here: " + joined(available_names());
  return false;
}

bool choose_from_environment() {
  const char* wanted = std::getenv("ATTNSCOPE_CPU_ISA");
  const std::string best = available_names().front();
  std::string error;
  if (wanted != nullptr && *wanted != '\0' && !apply(wanted, &error)) {
    std::fprintf(stderr, "attnscope: ATTNSCOPE_CPU_ISA=%s ignored: %s; running %s\n", wanted,
                 error.c_str(), best.c_str());
    apply(best, &error);
  } else if (wanted == nullptr || *wanted == '\0') {
    apply(best, &error);
  }
  return true;
}

}  // namespace

std::vector<std::string> cpu_isas_built() {
  std::vector<std::string> names = names_of(built_targets_in(HWY_TARGETS));
  if (kBf16SetBuilt) names.insert(names.begin(), kBf16Set);
  return names;
}

std::vector<std::string> cpu_isas_available() {
  choose_cpu_isa();
  return available_names();
}

std::string cpu_isa() {
  choose_cpu_isa();
  return bf16_dot_in_use ? kBf16Set : names_of(built_targets_in(hwy::SupportedTargets())).front();
}

bool bf16_dot_products() {
  choose_cpu_isa();
  return bf16_dot_in_use;
}

bool select_cpu_isa(const std::string& name, std::string* error) {
  choose_cpu_isa();
  return apply(name, error);
}

void choose_cpu_isa() {
  static const bool chosen = choose_from_environment();
  (void)chosen;
}

}  // namespace attnscope::cpu
