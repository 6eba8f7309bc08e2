// A small synthetic case shared by the view tests: Sq = 40 queries, Sk = 56 keys, D = Dv = 16,
// B = 1, `heads` query heads reading `kv_heads` kv heads (H = Hk by default), smooth values of
// either sign, each head its own.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/case_model.h"

namespace attnscope::test {

inline CaseData smoothCase(int64_t heads = 1, int64_t kv_heads = 0) {
  if (kv_heads == 0) kv_heads = heads;
  const int64_t sq = 40, sk = 56, d = 16;
  CaseData c;
  c.info.path = "/smooth";
  c.info.dims = {1, heads, kv_heads, sq, sk, d, d};
  c.info.config.dtype = "float32";
  const auto fill = [](int64_t n, float f) {
    std::vector<float> x(static_cast<size_t>(n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = 2.0f * std::sin(f * static_cast<float>(i) + f);
    return x;
  };
  c.tensors["q"] =
      HostTensor::from_float(DType::f32, {1, heads, sq, d}, fill(heads * sq * d, 0.37f));
  c.tensors["k"] =
      HostTensor::from_float(DType::f32, {1, kv_heads, sk, d}, fill(kv_heads * sk * d, 0.53f));
  c.tensors["v"] =
      HostTensor::from_float(DType::f32, {1, kv_heads, sk, d}, fill(kv_heads * sk * d, 0.71f));
  c.tensors["do"] =
      HostTensor::from_float(DType::f32, {1, heads, sq, d}, fill(heads * sq * d, 0.29f));
  return c;
}

}  // namespace attnscope::test
