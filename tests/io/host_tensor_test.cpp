// HostTensor's range reads: read_double and read_float of a slice give, element for element,
// at() and its fp32 rounding, in every dtype (NaN, infinities and subnormals included), and
// to_float is read_float of the whole tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/host_tensor.h"

namespace attnscope {
namespace {

bool same_bits(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(HostTensorRead, ranges_are_the_elements_in_every_dtype) {
  const double inf = std::numeric_limits<double>::infinity();
  // 1/3 is not exact in fp32: its fp64 copy rounds there; 1e-40 is an fp32 subnormal.
  const std::vector<double> values{0.0, -0.0, 1.0 / 3.0,    -2.5, 65504.0, 1e-40,
                                   inf, -inf, std::nan(""), 3e38, 7.0,     -1e-7};
  const int64_t n = static_cast<int64_t>(values.size());
  for (DType t : {DType::f16, DType::bf16, DType::f32, DType::f64, DType::u8}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<double> stored = values;
    if (t == DType::u8) {
      for (size_t e = 0; e < stored.size(); ++e) stored[e] = static_cast<double>(e * 21 % 256);
    }
    const HostTensor x = HostTensor::from_double(t, {n}, stored);
    for (const int64_t first : {int64_t{0}, int64_t{3}}) {
      const int64_t len = n - first - 1;
      std::vector<double> d(static_cast<size_t>(len));
      std::vector<float> f(d.size());
      x.read_double(first, len, d.data());
      x.read_float(first, len, f.data());
      for (int64_t e = 0; e < len; ++e) {
        const double want = x.at(first + e);
        EXPECT_TRUE(same_bits(d[static_cast<size_t>(e)], want)) << "read_double " << first + e;
        EXPECT_TRUE(same_bits(f[static_cast<size_t>(e)], static_cast<float>(want)))
            << "read_float " << first + e;
      }
    }
    const std::vector<float> all = x.to_float();
    ASSERT_EQ(static_cast<int64_t>(all.size()), n);
    for (int64_t e = 0; e < n; ++e) {
      EXPECT_TRUE(same_bits(all[static_cast<size_t>(e)], static_cast<float>(x.at(e)))) << e;
    }
  }
}

}  // namespace
}  // namespace attnscope
