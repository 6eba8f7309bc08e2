// Case builders and finding lookups shared by the analysis tests.
#include "analysis_test_util.h"

#include <gtest/gtest.h>

#include <random>

namespace attnscope::testing {

DType stored_dtype(const CaseData& c) {
  const std::string& d = c.info.config.dtype;
  return d == "float16" ? DType::f16 : d == "bfloat16" ? DType::bf16 : DType::f32;
}

void put(CaseData& c, const std::string& name, DType dtype, std::vector<int64_t> shape,
         const std::vector<double>& values) {
  c.tensors[name] = HostTensor::from_double(dtype, std::move(shape), values);
}

std::vector<double> values(const CaseData& c, const std::string& name) {
  return c.tensors.at(name).to_double();
}

CaseSpec spec(int64_t heads, int64_t kv_heads, const std::string& dtype) {
  CaseSpec s;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.dtype = dtype;
  return s;
}

CaseData make_case(const CaseSpec& s) {
  CaseData c;
  c.info.path = "/crafted";
  c.info.config.dtype = s.dtype;
  c.info.dims = {s.batch, s.heads, s.kv_heads, s.seqlen_q, s.seqlen_k, s.head_dim, s.head_dim};
  std::mt19937_64 engine(s.seed);
  std::normal_distribution<double> normal;
  auto normals = [&](int64_t n) {
    std::vector<double> x(static_cast<size_t>(n));
    for (double& v : x) v = normal(engine);
    return x;
  };
  const DType t = stored_dtype(c);
  const int64_t nq = s.batch * s.heads * s.seqlen_q * s.head_dim;
  const int64_t nk = s.batch * s.kv_heads * s.seqlen_k * s.head_dim;
  put(c, "q", t, {s.batch, s.heads, s.seqlen_q, s.head_dim}, normals(nq));
  put(c, "k", t, {s.batch, s.kv_heads, s.seqlen_k, s.head_dim}, normals(nk));
  put(c, "v", t, {s.batch, s.kv_heads, s.seqlen_k, s.head_dim}, normals(nk));
  if (s.dout) put(c, "do", t, {s.batch, s.heads, s.seqlen_q, s.head_dim}, normals(nq));
  return c;
}

Reference64 replay_reference(const CaseData& c) {
  Result<CaseInputs> in = make_case_inputs(c, RunChoice{});
  EXPECT_TRUE(in.ok()) << (in.ok() ? "" : in.error().describe());
  return in.ok() ? compute_reference64(*in, /*gradients=*/true, /*threads=*/1) : Reference64{};
}

CaseAnalysis analyze(const CaseData& c, const AnalysisSettings& settings) {
  Result<CaseAnalysis> a = analyze_case(c, settings);
  EXPECT_TRUE(a.ok()) << (a.ok() ? "" : a.error().describe());
  return a.ok() ? std::move(a).value() : CaseAnalysis{};
}

std::vector<const Finding*> of_kind(const CaseAnalysis& a, FindingKind kind) {
  std::vector<const Finding*> out;
  for (const Finding& f : a.findings) {
    if (f.kind == kind) out.push_back(&f);
  }
  return out;
}

bool has_kind(const CaseAnalysis& a, FindingKind kind) {
  return !of_kind(a, kind).empty();
}

std::string summary(const CaseAnalysis& a) {
  std::string out;
  for (const Finding& f : a.findings) {
    out += std::string(finding_kind_name(f.kind)) + "/" + severity_name(f.severity) + ": " +
           f.message + "\n";
  }
  return out.empty() ? "(no findings)" : out;
}

}  // namespace attnscope::testing
