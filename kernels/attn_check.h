// ATTNSCOPE_DCHECK: the contracts a kernel stage relies on (shapes, tile bounds, non-null
// operands, strides), stated at the stage's entry and checked in debug builds and where
// ATTNSCOPE_DCHECKS is defined (the CMake option ATTNSCOPE_KERNEL_DCHECKS, on in the ASan +
// UBSan build CI runs); elsewhere (NDEBUG: release builds) they compile to nothing and cost no
// cycle. A failed check prints the condition and its place and aborts. The public entry points
// validate() their arguments in every build; these checks catch a caller inside the kernels (a
// driver, the stepper, the head matrices) that breaks a stage's contract.
#pragma once

#include <cstdio>
#include <cstdlib>

#if defined(NDEBUG) && !defined(ATTNSCOPE_DCHECKS)
// Still type-checks the condition, so it cannot rot, but never evaluates it.
#define ATTNSCOPE_DCHECK(cond) static_cast<void>(sizeof(!(cond)))
#else
#define ATTNSCOPE_DCHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::attnscope::dcheck_failed(#cond, __FILE__, __LINE__))

namespace attnscope {

[[noreturn]] inline void dcheck_failed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: ATTNSCOPE_DCHECK failed: %s\n", file, line, condition);
  std::abort();
}

}  // namespace attnscope
#endif
