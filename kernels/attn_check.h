// ATTNSCOPE_DCHECK: the contracts a kernel stage relies on (shapes, tile bounds, non-null
// operands, strides), stated at the stage's entry and checked in debug builds; with NDEBUG
// (every release and CI build) they compile to nothing, like assert, and cost no cycle. The
// public entry points validate() their arguments in every build; these checks catch a caller
// inside the kernels (a driver, the stepper, the head matrices) that breaks a stage's contract.
#pragma once

#include <cassert>

#if defined(NDEBUG)
// Still type-checks the condition, so it cannot rot, but never evaluates it.
#define ATTNSCOPE_DCHECK(cond) static_cast<void>(sizeof(!(cond)))
#else
#define ATTNSCOPE_DCHECK(cond) assert(cond)
#endif
