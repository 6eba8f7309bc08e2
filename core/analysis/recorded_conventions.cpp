// Recorded-tensor conventions: sequence-major LSE, LSE bases, inverted mask polarity.
#include "core/analysis/recorded_conventions.h"

#include <cmath>

#include "core/analysis/finding_text.h"
#include "core/analysis/reference64.h"
#include "core/case_inputs.h"

namespace attnscope {
namespace {

constexpr double kLn2 = 0.69314718055994530942;

}  // namespace

std::optional<Finding> lse_layout_finding(const CaseInfo& info) {
  const TensorInfo* lse = info.find("lse");
  if (lse == nullptr || !lse_sequence_major(lse->shape, info.dims)) return std::nullopt;
  Finding f;
  f.kind = FindingKind::recorded_convention;
  f.severity = Severity::info;
  f.tensor = "lse";
  f.message = "recorded lse is stored sequence-major (" + lse->dataset + " shape [" +
              std::to_string(lse->shape.front()) +
              ", ...] = [B, Sq, H], not [B, H, Sq]): read "
              "with that layout, as FlashAttention's qv path and some varlen kernels store it";
  f.remedy =
      "nothing to fix if the kernel documents this layout; transpose before merging "
      "LSEs of different kernels (context-parallel merges assume one layout)";
  return f;
}

std::optional<Finding> lse_base_convention(RecordedComparison& c,
                                           const RecordedComparisonInputs& in) {
  if (c.within_rule || c.tensor != "lse") return std::nullopt;
  struct Base {
    double factor;  // recorded * factor is the natural-log LSE
    const char* what;
  };
  for (const Base b : {Base{kLn2, "in base 2 (log2-sum-exp = LSE / ln 2)"},
                       Base{1 / kLn2,
                            "scaled by ln 2 (LSE x ln 2, as FlexAttention's FLASH "
                            "backend returned it: pytorch #181645)"}}) {
    RecordedComparisonInputs again = in;
    again.recorded = [&in, factor = b.factor](int64_t first, int64_t n, double* out) {
      in.recorded(first, n, out);
      for (int64_t e = 0; e < n; ++e) out[e] *= factor;
    };
    RecordedComparison judged = compare_recorded(again);
    if (!judged.within_rule) continue;
    c = std::move(judged);
    Finding f;
    f.kind = FindingKind::recorded_convention;
    f.severity = Severity::warning;
    f.tensor = "lse";
    f.message = std::string("recorded lse matches the fp64 LSE of the replay once read ") + b.what +
                " (max error " + num(c.max_error) +
                " after converting, within the accuracy rule); as recorded it is off by the "
                "factor " +
                num(1 / b.factor);
    f.remedy =
        "convert before using it with natural-log LSEs (a backward, a context-parallel "
        "merge): multiply by " +
        num(b.factor) +
        "; if the kernel claims natural log, its "
        "LSE finalizer assumes the wrong base";
    return f;
  }
  return std::nullopt;
}

bool mask_polarity_inverted(const CaseData& data, bool o_within_rule, double threshold,
                            int threads) {
  const HostTensor* o = data.find("o");
  if (o_within_rule || o == nullptr || data.find("mask") == nullptr ||
      data.info.config.run.mask_convention == "masked_out") {
    return false;
  }
  CaseData inverted_view;
  inverted_view.info = data.info;
  inverted_view.info.config.run.mask_convention = "masked_out";
  for (const char* name : {"q", "k", "v", "mask", "bias"}) {
    if (const HostTensor* t = data.find(name)) inverted_view.tensors[name] = *t;
  }
  Result<CaseInputs> in = make_case_inputs(inverted_view, RunChoice{}, InputValues::none);
  if (!in) return false;
  const Reference64 ref =
      compute_reference64(reference_inputs(inverted_view, in->params), false, threads);
  const std::vector<double> rec = o->to_double();
  const PairStats s = compare_values(rec.data(), ref.o.data(), static_cast<int64_t>(rec.size()));
  return s.nonfinite_mismatch == 0 && s.max_error <= threshold;
}

Finding mask_polarity_finding(const CaseData& data) {
  Finding f;
  f.kind = FindingKind::recorded_convention;
  f.severity = Severity::warning;
  f.tensor = "mask";
  f.message =
      "the recorded o matches the fp64 replay only with the mask inverted: " + data.info.path +
      "/mask holds True = masked out (TransformerEngine's convention), not SDPA's "
      "True = attend; the case was analysed with the inverted mask";
  f.remedy =
      "store the mask with SDPA's polarity (~mask) or set the case attribute "
      "mask_convention = \"masked_out\"; pass ~mask when handing it to SDPA";
  return f;
}

}  // namespace attnscope
