// ValueReader: a flat tensor's values read a range at a time as fp64, from a vector the caller
// keeps alive, a vector summed over its batch, or a loaded tensor in its stored dtype, so that a
// consumer holds one head at a time instead of an fp64 copy of a whole tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/host_tensor.h"

namespace attnscope {

// Fills out[0, n) with elements [first, first + n) as fp64.
using ValueReader = std::function<void(int64_t first, int64_t n, double* out)>;

// The reader of a vector the caller keeps alive.
template <typename T>
ValueReader values_of(const std::vector<T>& x) {
  return [&x](int64_t first, int64_t n, double* out) {
    for (int64_t e = 0; e < n; ++e) out[e] = static_cast<double>(x[static_cast<size_t>(first + e)]);
  };
}

// The reader of a vector [batch, rest...] summed over its batch, as [1, rest...]: the gradient
// of an input torch broadcast over the batch (CaseDims::batch_summed).
template <typename T>
ValueReader batch_sum_of(const std::vector<T>& x, int64_t batch) {
  const int64_t per_batch = static_cast<int64_t>(x.size()) / batch;
  return [&x, batch, per_batch](int64_t first, int64_t n, double* out) {
    for (int64_t e = 0; e < n; ++e) {
      double sum = 0;
      for (int64_t b = 0; b < batch; ++b) {
        sum += static_cast<double>(x[static_cast<size_t>(b * per_batch + first + e)]);
      }
      out[e] = sum;
    }
  };
}

// The reader of a loaded tensor the caller keeps alive (exact: every stored dtype widens to fp64).
inline ValueReader values_of(const HostTensor& t) {
  return [&t](int64_t first, int64_t n, double* out) { t.read_double(first, n, out); };
}

}  // namespace attnscope
