// Crafted small cases for the findings tests: random q / k / v / dO stored in the run's dtype,
// tensor edits, and lookups of findings by kind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/case_analysis.h"
#include "core/analysis/reference64.h"

namespace attnscope::testing {

struct CaseSpec {
  int64_t batch = 1, heads = 2, kv_heads = 2, seqlen_q = 16, seqlen_k = 16, head_dim = 8;
  std::string dtype = "float16";  // run dtype attribute; tensors are stored in it
  bool dout = true;
  uint64_t seed = 1;
};

// A default spec with the given heads and dtype.
CaseSpec spec(int64_t heads, int64_t kv_heads, const std::string& dtype = "float16");

// q [B,H,Sq,D], k / v [B,Hk,Sk,D], do [B,H,Sq,D] ~ N(0, 1), rounded to the dtype.
CaseData make_case(const CaseSpec& spec);

// Replaces (or adds) a canonical tensor.
void put(CaseData& c, const std::string& name, DType dtype, std::vector<int64_t> shape,
         const std::vector<double>& values);
// The values of a tensor as fp64 (for edits followed by put()).
std::vector<double> values(const CaseData& c, const std::string& name);
DType stored_dtype(const CaseData& c);

// The fp64 reference (with gradients) of the replay of the recorded run: what the recorded
// check compares a recording with.
Reference64 replay_reference(const CaseData& c);

// analyze_case that must succeed.
CaseAnalysis analyze(const CaseData& c, const AnalysisSettings& settings = {});

std::vector<const Finding*> of_kind(const CaseAnalysis& a, FindingKind kind);
bool has_kind(const CaseAnalysis& a, FindingKind kind);
// "kind/severity" of every finding, for failure messages.
std::string summary(const CaseAnalysis& a);

}  // namespace attnscope::testing
