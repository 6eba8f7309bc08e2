// Cancellation polling inside the CPU drivers (CpuAttnOptions::cancelled): a worker calls
// check() before each tile or row block; a cancelled run throws KernelCancelled, which
// parallel_for rethrows once every worker has stopped at its next check.
#pragma once

#include <functional>

#include "kernels/cpu/fused_attention.h"

namespace attnscope::cpu {

class CancelPoll {
 public:
  CancelPoll() = default;
  // Refers to `cancelled` (which must outlive the poll); an empty function is never called.
  explicit CancelPoll(const std::function<bool()>& cancelled)
      : fn_(cancelled ? &cancelled : nullptr) {}

  // Throws KernelCancelled when the caller's predicate returns true.
  void check() const {
    if (fn_ != nullptr && (*fn_)()) throw KernelCancelled();
  }

 private:
  const std::function<bool()>* fn_ = nullptr;
};

}  // namespace attnscope::cpu
