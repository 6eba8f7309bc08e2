// SampleRandom: uniform from the top 53 bits of mt19937_64, normal by Box-Muller.
#include "sample_random.h"

#include <cmath>

namespace attnscope {

double SampleRandom::uniform() {
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

double SampleRandom::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(u1));
  const double angle = 2.0 * M_PI * u2;
  spare_ = radius * std::sin(angle);
  has_spare_ = true;
  return radius * std::cos(angle);
}

std::vector<double> SampleRandom::normals(int64_t count, double stddev) {
  std::vector<double> out(static_cast<size_t>(count));
  for (double& x : out) x = stddev * normal();
  return out;
}

}  // namespace attnscope
