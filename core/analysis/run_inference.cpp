// Inferring the fully-masked-row convention and the scale from the recorded o (run_inference.h).
#include "core/analysis/run_inference.h"

#include <cmath>
#include <vector>

#include "core/analysis/finding_text.h"
#include "core/analysis/reference64.h"
#include "core/case_inputs.h"
#include "core/replay.h"

namespace attnscope {
namespace {

// Whether the fp64 forward under `choice` reproduces `recorded` (the case's o as fp64).
bool reproduces(const CaseData& data, const RunChoice& choice, const std::vector<double>& recorded,
                double threshold, std::optional<Precision> stored, int threads) {
  Result<CaseInputs> in = make_case_inputs(data, choice, InputValues::none);
  if (!in) return false;
  const Reference64 ref = compute_reference64(reference_inputs(data, in->params), false, threads);
  for (size_t e = 0; e < recorded.size(); ++e) {
    const double x = recorded[e], r = ref.o[e];
    if (std::isfinite(x) != std::isfinite(r)) return false;
    if (!std::isfinite(x)) continue;
    const double allowed = stored ? std::fmax(threshold, 2 * storage_ulp(*stored, r)) : threshold;
    if (std::fabs(x - r) > allowed) return false;
  }
  return true;
}

}  // namespace

RunInference infer_run(const CaseData& data, const RecordedComparison& o, bool fully_masked_rows,
                       int threads) {
  RunInference out;
  const HostTensor* recorded_o = data.find("o");
  if (recorded_o == nullptr || o.within_rule) return out;
  const CaseConfig& cfg = data.info.config;
  std::vector<std::optional<MaskFill>> fills{std::nullopt};
  if (cfg.run.backend.empty() && fully_masked_rows && !cfg.run.inferred.mask_fill) {
    fills = {std::nullopt, MaskFill::safe, MaskFill::finfo_min};
  }
  const double d = static_cast<double>(data.info.dims.head_dim);
  const double current = cfg.effective_scale(data.info.dims.head_dim);
  std::vector<std::optional<double>> scales{std::nullopt};
  for (double s : {1 / std::sqrt(d), 1.0, 1 / d, std::sqrt(d)}) {
    if (std::fabs(s - current) > 1e-9 * current) scales.push_back(s);
  }
  const std::vector<double> rec = recorded_o->to_double();
  const std::optional<Precision> stored = stored_precision(recorded_o->dtype);
  // The fill alone, the scale alone, then both: the simplest explanation first.
  for (int changes = 1; changes <= 2; ++changes) {
    for (const auto& fill : fills) {
      for (const auto& scale : scales) {
        if (int(fill.has_value()) + int(scale.has_value()) != changes) continue;
        RunChoice choice;
        choice.mask_fill = fill;
        choice.scale = scale;
        if (!reproduces(data, choice, rec, o.threshold, stored, threads)) continue;
        out.run.mask_fill = fill;
        if (scale && cfg.scale) {
          out.scale_hint = scale;
        } else {
          out.run.scale = scale;
        }
        return out;
      }
    }
  }
  return out;
}

Finding inferred_run_finding(const CaseData& data, const InferredRun& inferred) {
  std::string what;
  if (inferred.mask_fill) what = fully_masked_rows_text(*inferred.mask_fill);
  if (inferred.scale) {
    what += std::string(what.empty() ? "" : "; ") + "softmax scale " + num(*inferred.scale);
  }
  std::string missing;
  if (inferred.mask_fill) missing = "no backend or framework version";
  if (inferred.scale) missing += std::string(missing.empty() ? "" : " and ") + "no scale";
  Finding f;
  f.kind = FindingKind::recorded_convention;
  f.severity = Severity::info;
  f.tensor = "o";
  f.message = "inferred from the recorded o: " + what + ". " + data.info.path + " records " +
              missing +
              "; the recording matches the fp64 replay only so, and the case was judged under it";
  f.remedy =
      "record the run with attnscope_record (it writes backend, torch_version and scale), or "
      "set the case attributes (backend, torch_version, scale) so that nothing is inferred";
  return f;
}

Finding scale_hint_finding(const CaseData& data, double hint) {
  const double recorded = *data.info.config.scale;
  Finding f;
  f.kind = FindingKind::recorded_convention;
  f.severity = Severity::warning;
  f.tensor = "o";
  f.message = "the recorded o matches the fp64 replay at softmax scale " + num(hint) +
              ", not at the recorded scale " + num(recorded) +
              ": the kernel ran with another scale than " + data.info.path + " says";
  f.remedy =
      "check the scale the kernel was given (a missing or doubled 1/sqrt(d): SDPA's scale= "
      "argument, q pre-scaled and scaled again) or the dump's scale attribute; `scan --scale " +
      num(hint) + "` tests the hypothesis";
  return f;
}

}  // namespace attnscope
