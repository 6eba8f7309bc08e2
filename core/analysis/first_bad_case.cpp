// First bad case: forward / backward verdicts per case, then the origin of the earliest bad
// step and the cases it propagates into.
#include "core/analysis/first_bad_case.h"

#include <algorithm>

namespace attnscope {
namespace {

// "step 3, layer 2", "micro-batch 1, layer 0", or the path when the case has neither.
std::string place(const CaseVerdict& v) {
  std::string out;
  if (v.step) out = "step " + std::to_string(*v.step);
  if (v.micro_batch && *v.micro_batch > 0) {
    out += (out.empty() ? "" : ", ") + std::string("micro-batch ") + std::to_string(*v.micro_batch);
  }
  if (v.layer) out += (out.empty() ? "" : ", ") + std::string("layer ") + std::to_string(*v.layer);
  return out.empty() ? v.path : out + " (" + v.path + ")";
}

std::string list(const std::vector<CaseVerdict>& v, const std::vector<size_t>& cases) {
  std::string out;
  for (size_t n = 0; n < cases.size() && n < 8; ++n) {
    const CaseVerdict& c = v[cases[n]];
    out += (n ? ", " : "") + (c.layer ? "layer " + std::to_string(*c.layer) : c.path);
  }
  if (cases.size() > 8) out += " and " + std::to_string(cases.size() - 8) + " more";
  return out;
}

}  // namespace

CaseVerdict verdict_of(const CaseInfo& info, const CaseAnalysis& analysis) {
  CaseVerdict v;
  v.path = info.path;
  v.step = info.config.step;
  v.micro_batch = info.config.run.micro_batch;
  v.layer = info.config.layer;
  for (const Finding& f : analysis.findings) {
    if (f.severity != Severity::error) continue;
    const bool backward = is_backward_finding(f);
    if (!(backward ? v.backward_error : v.forward_error)) {
      (backward ? v.backward_lead : v.forward_lead) = f.message;
    }
    (backward ? v.backward_error : v.forward_error) = true;
    v.dout_nonfinite =
        v.dout_nonfinite || (f.kind == FindingKind::nonfinite_input && f.tensor == "dO");
    const std::string kind = finding_kind_name(f.kind);
    if (std::find(v.kinds.begin(), v.kinds.end(), kind) == v.kinds.end()) v.kinds.push_back(kind);
  }
  return v;
}

std::optional<FirstBadCase> first_bad_case(const std::vector<CaseVerdict>& verdicts) {
  const auto bad = [&](size_t n) {
    return verdicts[n].forward_error || verdicts[n].backward_error;
  };
  size_t first = verdicts.size();
  for (size_t n = 0; n < verdicts.size() && first == verdicts.size(); ++n) {
    if (bad(n)) first = n;
  }
  if (first == verdicts.size()) return std::nullopt;
  // The cases of the first bad step (cases without a step form one step).
  const std::optional<int64_t> step = verdicts[first].step;
  std::vector<size_t> in_step;
  for (size_t n = 0; n < verdicts.size(); ++n) {
    if (verdicts[n].step == step) in_step.push_back(n);
  }
  FirstBadCase out;
  const auto forward = std::find_if(in_step.begin(), in_step.end(),
                                    [&](size_t n) { return verdicts[n].forward_error; });
  if (forward != in_step.end()) {
    out.index = *forward;
  } else {
    // Only gradients went bad: the backward started where dO was still finite, i.e. the last
    // such case in forward order (or the last bad one when every dO was poisoned).
    out.from_backward = true;
    out.index = first;
    for (size_t n : in_step) {
      if (!verdicts[n].backward_error) continue;
      if (!verdicts[n].dout_nonfinite || verdicts[out.index].dout_nonfinite) out.index = n;
    }
  }
  for (size_t n : in_step) {
    if (n == out.index || !bad(n)) continue;
    const bool before = n < out.index;
    if (before && verdicts[n].backward_error) out.backward_into.push_back(n);
    if (!before && !out.from_backward && verdicts[n].forward_error) out.forward_into.push_back(n);
  }
  for (size_t n = 0; n < verdicts.size(); ++n) {
    if (!bad(n) || !verdicts[n].step || verdicts[n].step == step) continue;
    if (std::find(out.later_steps.begin(), out.later_steps.end(), *verdicts[n].step) ==
        out.later_steps.end()) {
      out.later_steps.push_back(*verdicts[n].step);
    }
  }
  const CaseVerdict& origin = verdicts[out.index];
  out.lead = out.from_backward ? origin.backward_lead : origin.forward_lead;
  std::string kinds;
  for (const std::string& k : origin.kinds) kinds += (kinds.empty() ? "" : ", ") + k;
  out.text = place(origin) + ": " + kinds + (out.from_backward ? " (started in the backward)" : "");
  if (!out.forward_into.empty()) {
    out.text += "; propagates forward into " + list(verdicts, out.forward_into);
  }
  if (!out.backward_into.empty()) {
    out.text += std::string(out.forward_into.empty() ? "; propagates" : ", and") +
                " through dO into the gradients of " + list(verdicts, out.backward_into);
  }
  if (!out.later_steps.empty()) {
    out.text += "; " + std::to_string(out.later_steps.size()) + " later step" +
                (out.later_steps.size() > 1 ? "s" : "") + " also have errors (first: step " +
                std::to_string(out.later_steps.front()) + ")";
  }
  return out;
}

}  // namespace attnscope
