// Deterministic random numbers for the sample generator: the same values on every run and
// platform (std::mt19937_64's sequence is fixed by the standard; the normal transform is ours).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace attnscope {

class SampleRandom {
 public:
  explicit SampleRandom(uint64_t seed) : engine_(seed) {}

  double uniform();  // [0, 1)
  double normal();   // N(0, 1), Box-Muller
  std::vector<double> normals(int64_t count, double stddev);

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0;
};

}  // namespace attnscope
