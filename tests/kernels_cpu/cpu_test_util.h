// Shared helpers of the CPU kernel tests: random attention cases, running the CPU kernels and
// the fp64 reference on the same (rounded) inputs, and error / NaN-pattern measures.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/attn_params.h"
#include "kernels/cpu/fused_attention.h"
#include "kernels/reference/reference_attention.h"

namespace attnscope::test {

enum class MaskKind { none, full, broadcast, key_padding };

struct CaseConfig {
  std::string name;
  int64_t batch = 1, heads = 1, kv_heads = 1;
  int64_t sq = 17, sk = 17, d = 16, dv = 0;  // dv = 0: same as d
  bool causal = false;
  CausalAlign align = CausalAlign::top_left;
  MaskKind mask =
      MaskKind::none;         // full [B,H,Sq,Sk], broadcast [1,1,Sq,Sk], key_padding [B,1,1,Sk]
  bool bias = false;          // bias [1, H, Sq, Sk] broadcast over the batch
  bool bias_neg_inf = false;  // ~10 % of the bias entries are -inf
  double softcap = 0;
  MaskFill fill = MaskFill::neg_inf;
  Precision precision = Precision::f32;
  uint32_t seed = 1;
  // Dropout from a random keep-mask (add_dropout): each entry kept with probability
  // 1 - dropout_p; full [B, H, Sq, Sk], or [1, H, Sq, Sk] broadcast over the batch.
  bool dropout = false;
  double dropout_p = 0;
  bool dropout_broadcast = false;
  BackwardP backward_p = BackwardP::saved;
};

// gtest prints a case by its name.
inline void PrintTo(const CaseConfig& c, std::ostream* os) {
  *os << c.name;
}

// Inputs rounded to config.precision (bias too); the reference sees exactly these values.
struct TestCase {
  CaseConfig config;
  std::vector<float> q, k, v, dout;
  std::vector<double> bias;
  std::vector<uint8_t> mask, keep;  // keep: the dropout keep-mask, empty without dropout
  BroadcastStrides mask_strides, bias_strides, keep_strides;
};

TestCase make_case(const CaseConfig& config);

// Gives c a dropout keep-mask drawn from `seed` (config.dropout_p, config.dropout_broadcast are
// set to p, broadcast).
void add_dropout(TestCase& c, double p, bool broadcast, uint32_t seed);

// Causal (bottom-right) Sq = 150, Sk = 200, D = 32 with a broadcast bool mask and a bias
// holding -inf entries, GQA 2:1; a NaN in q of (batch 1, head 1) row 70 and a NaN bias entry at
// (120, 30).
TestCase messy_pooling_case(Precision precision);

// AttnParams of a case, pointing into its mask / bias storage.
AttnParams params_of(const TestCase& c);

ReferenceTrace run_reference(const TestCase& c);
CpuAttnResult run_cpu(const TestCase& c, Mode mode, int threads = 2);
// The same with CpuAttnOptions::trace pointing at *trace.
CpuAttnResult run_cpu_traced(const TestCase& c, Mode mode, CpuTrace* trace, int threads = 2);
// The inputs of a case as the CPU kernels take them.
CpuAttnInputs inputs_of(const TestCase& c);

// Crafted pathologies. Sq = 17, Sk = 97, D = 32 with a full bool mask: row kMaskedRow of
// (batch 0, head 0) attends to nothing, every other row to at least one key.
constexpr int64_t kMaskedRow = 3;
TestCase fully_masked_row_case(MaskFill fill, Precision precision);
// Sq = 4, Sk = 8, D = 64; q_0 = k_0 = 40 in all dims: q_0 . k_0 = 102400 > 65504, scaled
// score 12800.
TestCase qk_overflow_case(Precision precision);

// Largest |got - ref| over the positions where both are finite.
double max_abs_diff(const std::vector<float>& got, const std::vector<double>& ref);
// Largest |ref| over the finite positions.
double max_abs(const std::vector<double>& ref);
// Number of positions whose class (finite, NaN, +inf, -inf) differs between got and ref.
int64_t nonfinite_mismatches(const std::vector<float>& got, const std::vector<double>& ref);
int64_t count_nonfinite(const std::vector<float>& x);

// The m x n dot products of A [m x k] and B [k x n] (rows contiguous) as pairs of rows, for
// the row-wise dot kernels: row r * n + x of a_rows is row r of A, of b_cols column x of B.
struct DotRows {
  std::vector<float> a_rows, b_cols;
};
DotRows dot_rows_of(const std::vector<float>& a, const std::vector<float>& b, int64_t m, int64_t n,
                    int64_t k);

}  // namespace attnscope::test
