// analyze_case: kernel runs per mode, masking analysis, fp64 recomputation where needed,
// recorded-output comparisons, clipping, then the findings passes and the summary stats.
#include "core/analysis/case_analysis.h"

#include <algorithm>
#include <cmath>

#include "core/analysis/analysis_context.h"
#include "core/analysis/analysis_memory.h"
#include "core/analysis/clip_report.h"
#include "core/analysis/reference64.h"
#include "core/memory_budget.h"
#include "kernels/cpu/parallel_for.h"

namespace attnscope {
namespace {

constexpr const char* kRecordedNames[] = {"o", "lse", "dq", "dk", "dv"};

std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// fp32 copies of the inputs the CPU kernels read.
struct KernelInputs {
  std::vector<float> q, k, v, dout;
  CpuAttnInputs view() const {
    return {q.data(), k.data(), v.data(), dout.empty() ? nullptr : dout.data()};
  }
};

ModeRun run_mode(const AttnParams& params, const KernelInputs& in, Mode mode, int threads,
                 bool trace, const std::function<bool()>& cancelled = {}) {
  ModeRun r;
  r.mode = mode;
  r.precision = params.precision;
  CpuAttnOptions options;
  options.mode = mode;
  options.threads = threads;
  options.cancelled = cancelled;
  if (trace) options.trace = &r.trace;
  r.out = cpu_attention(params, options, in.view());
  return r;
}

NonfiniteTally tally(const std::vector<float>& x) {
  NonfiniteTally t;
  for (float v : x) {
    if (std::isnan(v)) {
      ++t.nan;
    } else if (std::isinf(v)) {
      ++(v > 0 ? t.pos_inf : t.neg_inf);
    }
  }
  return t;
}

RunStats run_stats(const AttnParams& params, const ModeRun& r) {
  RunStats s;
  s.mode = r.mode;
  s.precision = r.precision;
  for (const TileStats& t : r.trace.forward.tiles) {
    s.max_abs_s = std::max(s.max_abs_s, double{t.max_abs_s});
  }
  bool any_lse = false;
  for (float x : r.out.lse) {
    if (!std::isfinite(x)) continue;
    s.min_lse = any_lse ? std::min(s.min_lse, double{x}) : x;
    s.max_lse = any_lse ? std::max(s.max_lse, double{x}) : x;
    any_lse = true;
  }
  s.o = tally(r.out.o);
  s.lse = tally(r.out.lse);
  s.dq = tally(r.out.dq);
  s.dk = tally(r.out.dk);
  s.dv = tally(r.out.dv);
  s.norms = gradient_norms(run_gradients(params, r));
  return s;
}

const std::vector<double>* recorded_output(const Reference64& ref, const std::string& name) {
  if (name == "o") return &ref.o;
  if (name == "lse") return &ref.lse;
  if (!ref.has_gradients) return nullptr;
  return name == "dq" ? &ref.dq : name == "dk" ? &ref.dk : &ref.dv;
}

std::vector<float> run_output(const ModeRun& r, const std::string& name) {
  if (name == "o") return r.out.o;
  if (name == "lse") return r.out.lse;
  return name == "dq" ? r.out.dq : name == "dk" ? r.out.dk : r.out.dv;
}

TensorGeometry geometry_of(const AttnParams& p, const std::string& name) {
  const bool kv = name == "dk" || name == "dv";
  const int64_t heads = kv ? p.kv_heads : p.heads;
  const int64_t rows = kv ? p.seqlen_k : p.seqlen_q;
  const int64_t cols = name == "lse"                   ? 1
                       : (name == "o" || name == "dv") ? p.head_dim_v
                                                       : p.head_dim;
  return {p.batch * heads, rows, cols, heads};
}

// Recorded tensors vs fp64, with the accuracy rule's baseline (unfused) and the fused run at
// the recorded precision (run here when the analysis used another precision or mode set).
std::vector<RecordedComparison> compare_recordings(const CaseData& data, const CaseInputs& in,
                                                   const KernelInputs& kin,
                                                   const std::vector<ModeRun>& runs,
                                                   const Reference64& ref, int threads) {
  std::vector<RecordedComparison> out;
  const Precision recorded =
      precision_from_dtype(data.info.config.dtype).value_or(in.params.precision);
  AttnParams params = in.params;
  params.precision = recorded;
  std::vector<const ModeRun*> same(2, nullptr);
  std::vector<ModeRun> extra;
  extra.reserve(2);
  for (Mode m : {Mode::fused, Mode::unfused}) {
    for (const ModeRun& r : runs) {
      if (r.mode == m && r.precision == recorded) same[static_cast<size_t>(m)] = &r;
    }
    if (same[static_cast<size_t>(m)] == nullptr) {
      extra.push_back(run_mode(params, kin, m, threads, false));
      same[static_cast<size_t>(m)] = &extra.back();
    }
  }
  for (const char* name : kRecordedNames) {
    const HostTensor* t = data.find(name);
    const std::vector<double>* reference = recorded_output(ref, name);
    if (t == nullptr || reference == nullptr) continue;
    const std::vector<double> rec = t->to_double();
    const std::vector<double> fused = to_double(run_output(*same[0], name));
    const std::vector<double> unfused = to_double(run_output(*same[1], name));
    RecordedComparisonInputs c;
    c.tensor = name;
    c.geometry = geometry_of(in.params, name);
    c.recorded = &rec;
    c.reference = reference;
    c.baseline = &unfused;
    c.same_precision = &fused;
    c.gradient = name[0] == 'd';
    out.push_back(compare_recorded(c));
  }
  return out;
}

bool has_recorded_gradients(const CaseData& data) {
  return data.find("dq") != nullptr || data.find("dk") != nullptr || data.find("dv") != nullptr;
}

}  // namespace

const ModeRun* CaseAnalysis::run(Mode mode) const {
  for (const ModeRun& r : runs) {
    if (r.mode == mode) return &r;
  }
  return nullptr;
}

Result<CaseAnalysis> analyze_case(const CaseData& data, const AnalysisSettings& settings) {
  const bool recorded = settings.recorded_check &&
                        std::any_of(std::begin(kRecordedNames), std::end(kRecordedNames),
                                    [&](const char* n) { return data.find(n) != nullptr; });
  // Everything but the fp64 naive backward, checked before any allocation.
  int64_t extra_elements = 0;
  for (const char* name : {"mask", "bias"}) {
    if (const HostTensor* t = data.find(name)) extra_elements += t->numel();
  }
  const int64_t needed = analysis_bytes(data.info.dims, extra_elements,
                                        static_cast<int64_t>(settings.modes.size()), recorded);
  if (Status fits = check_memory(data.info.path + ": analysing the case", needed); !fits) {
    return fits.error();
  }
  Result<CaseInputs> made = make_case_inputs(data, settings.run);
  if (!made) return made.error();
  CaseInputs& in = *made;
  KernelInputs kin{in.q_f32(), in.k_f32(), in.v_f32(),
                   in.has_dout ? in.dout_f32() : std::vector<float>{}};

  CaseAnalysis a;
  a.path = data.info.path;
  a.params = in.params;
  a.params.mask = nullptr;
  a.params.bias = nullptr;
  const auto stop = [&] {
    a.interrupted = a.interrupted || (settings.cancelled && settings.cancelled());
    return a.interrupted;
  };
  for (Mode m : settings.modes) {
    if (stop()) return a;
    try {  // the kernels poll `cancelled` per tile and throw when it fires
      a.runs.push_back(run_mode(in.params, kin, m, settings.threads, true, settings.cancelled));
    } catch (const KernelCancelled&) {
      a.interrupted = true;
      return a;
    }
  }
  if (stop()) return a;
  const MaskInfo masks = analyze_masks(in.params);

  const AttnParams& p = in.params;
  if (settings.precision_check || recorded) {
    // The naive backward holds S, P, dP, dS of a kv group per worker: recorded gradients are
    // checked up to 16M entries per group, precision_loss of gradients within
    // reference_gradient_budget; as many groups run at once as the memory budget leaves room
    // for, none when one does not fit.
    const bool within_budget =
        p.batch * p.heads * p.seqlen_q * p.seqlen_k <= settings.reference_gradient_budget;
    const bool group_fits = p.group_size() * p.seqlen_q * p.seqlen_k <= (int64_t{1} << 24);
    const bool gradients = group_fits && ((recorded && has_recorded_gradients(data)) ||
                                          (settings.precision_check && within_budget));
    const ReferencePlan plan =
        plan_reference(data.info.dims, gradients, cpu::resolve_threads(settings.threads),
                       memory_budget().bytes - needed);
    a.reference_note = plan.skipped;
    a.reference = compute_reference64(
        in, plan.gradients, plan.gradients ? plan.workers : settings.threads, settings.cancelled);
  }
  if (stop()) return a;
  if (recorded) {
    a.recorded = compare_recordings(data, in, kin, a.runs, *a.reference, settings.threads);
  }
  if (stop()) return a;
  if (settings.clip_norm) {
    for (const ModeRun& r : a.runs) {
      a.clips.push_back(make_clip_report(p, r, *settings.clip_norm, settings.clip_scope));
    }
  }

  const Reference64* reference = a.reference ? &*a.reference : nullptr;
  const AnalysisContext cx{data, in, settings, a.runs, masks, reference, a.recorded, a.clips};
  add_input_findings(cx, a.findings);
  a.stats.max_abs_qk = add_score_findings(cx, a.findings);
  add_forward_findings(cx, a.findings);
  add_gradient_findings(cx, a.findings);
  add_recorded_findings(cx, a.findings);
  sort_findings(a.findings);

  for (const ModeRun& r : a.runs) a.stats.runs.push_back(run_stats(p, r));
  a.stats.fully_masked_rows = masks.fully_masked_rows;
  return a;
}

}  // namespace attnscope
