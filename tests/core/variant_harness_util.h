// Helpers of the variant harness: deterministic attention cases with inputs rounded to the
// case's precision, the cached fp64 oracle plus the unfused same-precision baseline, and the
// accuracy rule of DESIGN §3.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/kernel_registry.h"
#include "kernels/attn_params.h"

namespace attnscope::test {

// full [B, H, Sq, Sk]; broadcast [1, 1, Sq, Sk]; key_padding [B, 1, 1, Sk]. Every mask keeps
// key 0, so no row is fully masked (variants differ there by design, see torch-flash-cpu).
enum class HarnessMask { none, full, broadcast, key_padding };

struct HarnessCase {
  std::string name;  // what it pins, ending in the precision: "causal_d59_s97_bf16"
  int64_t batch = 1, heads = 1, kv_heads = 1;
  int64_t sq = 17, sk = 17, d = 16, dv = 0;  // dv = 0: same as d
  bool causal = false;
  CausalAlign align = CausalAlign::top_left;
  HarnessMask mask = HarnessMask::none;
  bool bias = false;  // [1, H, Sq, Sk] broadcast over the batch
  double softcap = 0;
  Precision precision = Precision::f32;
};

// gtest prints a case by its name.
inline void PrintTo(const HarnessCase& c, std::ostream* os) {
  *os << c.name;
}

// The harness's shapes (precision not set, names without it): seqlen {1, 17, 97, 128, 1025},
// head_dim {16, 32, 59, 64, 111, 128}, Sq != Sk both ways, both causal alignments, GQA / MQA,
// every mask kind, bias, Dv != D and softcap.
std::vector<HarnessCase> harness_shapes();
// The case at precision p, its name suffixed "_f64", "_f32", "_f16" or "_bf16".
HarnessCase at_precision(HarnessCase c, Precision p);

// Inputs of a case as fp64 values exactly representable in its precision (q, k in [-2, 2),
// v, dout, bias in [-1, 1) before rounding); params point into this object.
struct HarnessInputs {
  HarnessCase config;
  AttnParams params;
  std::vector<double> q, k, v, dout, bias;
  std::vector<uint8_t> mask;

  VariantInputs view() const { return {q.data(), k.data(), v.data(), dout.data()}; }
};

std::unique_ptr<HarnessInputs> make_inputs(const HarnessCase& c);

// What a variant of a case is checked against: the fp64 reference on the rounded inputs and,
// at fp16 / bf16, the cpu-unfused run at that precision. Computed once per case name.
struct Oracle {
  std::shared_ptr<HarnessInputs> inputs;
  VariantOutputs reference;
  VariantOutputs unfused;  // empty at fp32 / fp64
};

const Oracle& oracle_for(const HarnessCase& c);

// Largest |got - ref| over the positions where ref is finite; +inf when got is not finite
// there or the sizes differ.
double max_abs_error(const std::vector<double>& got, const std::vector<double>& ref);
// Largest finite |x|.
double max_abs(const std::vector<double>& x);

// The accuracy rule for one output (DESIGN §3), as a bound on max|got - ref|:
//   fp64: 1e-12 * max|ref| + 1e-14;  fp32: 1e-5 * max|ref| + 1e-6;
//   fp16 / bf16: factor * max|unfused - ref| + floor, factor 2 for O and LSE and 3 for dQ, dK,
//   dV. The floor is the fp32 bound, 1e-5 * max|ref| + 1e-6: a result as accurate as an fp32
//   kernel passes even where the low-precision baseline happens to be exact (Sk = 1 gives
//   O = V). The absolute 1e-6 (inputs are O(1)) covers outputs that are exactly 0 in fp64,
//   such as dQ and dK when Sk = 1, where any kernel leaves cancellation noise of ~1e-7.
double accuracy_bound(Precision p, double factor, const std::vector<double>& ref,
                      const std::vector<double>& unfused);

}  // namespace attnscope::test
