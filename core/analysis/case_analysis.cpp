// analyze_case: kernel runs per mode, masking analysis, fp64 recomputation where needed,
// recorded-output comparisons against the replay of the recorded run, clipping, then the
// findings passes (grouped per kind and tensor) and the summary stats.
#include "core/analysis/case_analysis.h"

#include <algorithm>
#include <cmath>

#include "core/analysis/analysis_context.h"
#include "core/analysis/analysis_memory.h"
#include "core/analysis/clip_report.h"
#include "core/analysis/packed_findings.h"
#include "core/analysis/recorded_conventions.h"
#include "core/analysis/recorded_feed.h"
#include "core/analysis/reference64.h"
#include "core/analysis/run_inference.h"
#include "core/memory_budget.h"
#include "kernels/cpu/buffer.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/precision.h"

namespace attnscope {
namespace {

void round_in_place(Precision p, std::vector<float>& x) {
  for (float& v : x) v = round_to(p, v);
}

// One kernel run at params.precision; `upcast` runs the fused kernel at fp32 and rounds o, dq,
// dk, dv once to params.precision (SDPA MATH on CPU).
ModeRun run_mode(const AttnParams& params, const KernelInputs& in, Mode mode, bool upcast,
                 int threads, bool trace, const std::function<bool()>& cancelled = {}) {
  ModeRun r;
  r.mode = mode;
  r.precision = params.precision;
  r.upcast = upcast && mode == Mode::fused && params.precision != Precision::f32;
  AttnParams kernel = params;
  if (r.upcast) kernel.precision = Precision::f32;
  CpuAttnOptions options;
  options.mode = mode;
  options.threads = threads;
  options.cancelled = cancelled;
  if (trace) options.trace = &r.trace;
  r.out = cpu_attention(kernel, options, in.view());
  // An analysis runs each kernel once: the blocks its call left in the buffer pool (a quarter
  // GB for a real-size layer) are freed before the next run or the fp64 reference.
  cpu::buffer_pool_clear();
  if (r.upcast) {
    for (std::vector<float>* x : {&r.out.o, &r.out.dq, &r.out.dk, &r.out.dv}) {
      round_in_place(params.precision, *x);
    }
  }
  return r;
}

CellCounts tally(const std::vector<float>& x) {
  CellCounts t;
  for (float v : x) {
    if (std::isnan(v)) {
      ++t.nan;
    } else if (std::isinf(v)) {
      ++(v > 0 ? t.pos_inf : t.neg_inf);
    } else {
      ++t.finite;
    }
  }
  return t;
}

RunStats run_stats(const AttnParams& params, const ModeRun& r) {
  RunStats s;
  s.mode = r.mode;
  s.precision = r.precision;
  s.upcast = r.upcast;
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
  s.norms = gradient_norms(params, r);
  return s;
}

// What the recorded-output check compares against: the replay of the recorded run (its
// inputs, fp64 reference and the runs at the recorded precision), whatever the what-if.
struct RecordedReplay {
  const CaseInputs* in = nullptr;
  const KernelInputs* kin = nullptr;
  const ModeRun* run = nullptr;  // the replay's own kernel (its first mode)
  // Unfused at the recorded precision (accuracy rule) when an analysis run is that; else null,
  // and the recorded feed runs it group by group as the reference streams.
  const ModeRun* baseline = nullptr;
  std::vector<ModeRun> extra;  // the run made here because the analysis did not have it
};

// Points r.run at an analysis run with the recorded semantics, or runs it; r.baseline at an
// analysis run that is the baseline, if any.
void find_or_run(RecordedReplay& r, const Replay& replay, const std::vector<ModeRun>* runs,
                 int threads) {
  const Mode mode = replay.modes.front();
  const bool upcast = replay.upcast;
  auto pick = [&](Mode m, bool up) -> const ModeRun* {
    if (runs == nullptr) return nullptr;
    for (const ModeRun& run : *runs) {
      if (run.mode == m && run.upcast == up) return &run;
    }
    return nullptr;
  };
  r.run = pick(mode, upcast);
  if (r.run == nullptr) {
    r.extra.push_back(run_mode(r.in->params, *r.kin, mode, upcast, threads, false));
    r.run = &r.extra.back();
  }
  r.baseline = mode == Mode::unfused && !upcast ? r.run : pick(Mode::unfused, false);
}

const RecordedComparison* comparison_of(const std::vector<RecordedComparison>& list,
                                        const std::string& tensor) {
  for (const RecordedComparison& c : list) {
    if (c.tensor == tensor) return &c;
  }
  return nullptr;
}

bool has_recorded_gradients(const CaseData& data) {
  return data.find("dq") != nullptr || data.find("dk") != nullptr || data.find("dv") != nullptr;
}

}  // namespace

const char* run_name(const ModeRun& r) {
  return r.upcast ? "upcast" : mode_name(r.mode);
}

std::string what_if_explains_text(const CaseAnalysis& a) {
  if (!a.what_if_explains) return {};
  if (a.what_if_explains->empty()) return "the what-if reproduces none of the recorded outputs";
  std::string names;
  for (const std::string& n : *a.what_if_explains) names += (names.empty() ? "" : ", ") + n;
  return "the what-if reproduces the recorded " + names;
}

const ModeRun* CaseAnalysis::run(Mode mode) const {
  for (const ModeRun& r : runs) {
    if (r.mode == mode) return &r;
  }
  return nullptr;
}

namespace {}  // namespace

Result<CaseAnalysis> analyze_case(const CaseData& data, const AnalysisSettings& settings) {
  const Replay replay = replay_of(data.info.config, data.find("dropout_mask") != nullptr);
  const ResolvedRun run =
      resolve(settings.run, replay, data.info.config.effective_scale(data.info.dims.head_dim));
  const std::vector<Mode>& modes = run.modes;
  const bool upcast = run.upcast;
  const bool recorded = settings.recorded_check &&
                        std::any_of(std::begin(kRecordedNames), std::end(kRecordedNames),
                                    [&](const char* n) { return data.find(n) != nullptr; });
  // No fp64 copy of q, k, v, dO: the reference and the findings read them from `data`.
  Result<CaseInputs> made = make_case_inputs(data, settings.run, InputValues::none);
  if (!made) return made.error();
  CaseInputs& in = *made;
  // Everything but the fp64 naive backward, checked before any allocation; a what-if with
  // recorded outputs also holds the replay's inputs, two runs and its fp64 reference.
  int64_t extra_elements = 0;
  for (const char* name : {"mask", "bias", "dropout_mask"}) {
    if (const HostTensor* t = data.find(name)) extra_elements += t->numel();
  }
  const int64_t replay_runs = run.runs_differ() && recorded ? 4 : 0;
  const int64_t needed = analysis_bytes(data.info.dims, extra_elements,
                                        static_cast<int64_t>(modes.size()) + replay_runs, recorded);
  if (Status fits = check_memory(data.info.path + ": analysing the case", needed); !fits) {
    return fits.error();
  }
  std::optional<KernelInputs> kin(std::in_place, data);

  CaseAnalysis a;
  a.path = data.info.path;
  a.params = in.params;
  a.params.mask = nullptr;
  a.params.bias = nullptr;
  a.params.dropout_keep = nullptr;
  a.replay = replay;
  a.what_if = run.what_if();
  a.judged_under = run.judged_under;
  const auto stop = [&] {
    a.interrupted = a.interrupted || (settings.cancelled && settings.cancelled());
    return a.interrupted;
  };
  for (Mode m : modes) {
    if (stop()) return a;
    try {  // the kernels poll `cancelled` per tile and throw when it fires
      a.runs.push_back(
          run_mode(in.params, *kin, m, upcast, settings.threads, true, settings.cancelled));
    } catch (const KernelCancelled&) {
      a.interrupted = true;
      return a;
    }
  }
  if (stop()) return a;
  const MaskInfo masks = analyze_masks(in.params);

  const AttnParams& p = in.params;
  // The fp64 backward (streamed, no [Sq, Sk] buffer) runs for recorded gradients always, for
  // precision_loss of gradients within reference_gradient_budget (its time).
  const bool within_budget =
      p.batch * p.heads * p.seqlen_q * p.seqlen_k <= settings.reference_gradient_budget;
  const bool recorded_gradients = recorded && has_recorded_gradients(data);
  // Every whole kernel run first (the replay's and the hypothesis test's too), so that the fp32
  // inputs and the kernels' pooled buffers are freed before the fp64 references and the
  // comparisons; the accuracy rule's baseline, unless an analysis run is it, runs group by
  // group in the recorded feed as the reference streams (its outputs held for one group).
  std::optional<CaseInputs> replay_in;  // a what-if keeps the recorded-output check on the replay
  RecordedReplay rr, wr;
  // The hypothesis test: the recorded-output check against the what-if's runs and reference.
  Replay hypothesis = replay;
  hypothesis.modes = run.modes;
  hypothesis.upcast = run.upcast;
  if (recorded) {
    rr = RecordedReplay{&in, &*kin, nullptr, nullptr, {}};
    if (run.runs_differ()) {
      Result<CaseInputs> as_recorded = make_case_inputs(data, RunChoice{}, InputValues::none);
      if (!as_recorded) return as_recorded.error();
      replay_in.emplace(std::move(*as_recorded));
      rr = RecordedReplay{&*replay_in, &*kin, nullptr, nullptr, {}};
    }
    find_or_run(rr, replay, run.runs_differ() ? nullptr : &a.runs, settings.threads);
    if (run.runs_differ()) {
      wr = RecordedReplay{&in, &*kin, nullptr, nullptr, {}};
      find_or_run(wr, hypothesis, &a.runs, settings.threads);
    }
    rr.kin = wr.kin = nullptr;
  }
  kin.reset();
  if (stop()) return a;

  // The fp64 references stream group by group into the recorded comparisons (RecordedFeed) and
  // what the findings read of them (ReferenceDigest): neither is held whole. The analysis' own
  // (under the run choice) feeds precision_loss and, replaying the recorded run, the recorded
  // check; a what-if's feeds its hypothesis test, and the replay's then streams on its own.
  const AnalysisContext streaming{data,   in,      settings,   a.runs,
                                  masks,  nullptr, a.recorded, a.clips,
                                  replay, nullptr, rr.run,     run.runs_differ()};
  std::optional<ReferenceDigest> digest, replay_digest;
  std::optional<RecordedFeed> feed, hypothesis_feed;
  std::vector<Finding> conventions;  // recorded_convention findings of the comparisons
  if (settings.precision_check || recorded) {
    const bool replays = !run.runs_differ();
    const bool gradients =
        (settings.precision_check && within_budget) || (replays && recorded_gradients);
    digest = start_digest(streaming, gradients);
    if (recorded && replays) {
      feed.emplace(data, rr.in->params, *rr.run, rr.baseline, replay, gradients, settings.threads);
    } else if (recorded) {
      hypothesis_feed.emplace(data, wr.in->params, *wr.run, wr.baseline, hypothesis, gradients,
                              settings.threads);
    }
    stream_reference64(
        reference_inputs(data, in.params), gradients, settings.threads,
        [&](const GroupReference& g) {
          digest_precision(streaming, g, *digest);
          if (feed) {
            feed->add(g);
            digest_zero_rows(streaming, g, *digest);
          }
          if (hypothesis_feed) hypothesis_feed->add(g);
        },
        settings.cancelled);
    if (settings.precision_check && !gradients && !within_budget) {
      a.reference_note = "precision_loss of dq, dk, dv not judged: " +
                         std::to_string(p.batch * p.heads * p.seqlen_q * p.seqlen_k) +
                         " scores (B*H*Sq*Sk) are more than the " +
                         std::to_string(settings.reference_gradient_budget) +
                         " up to which a scan computes fp64 gradients for it (recorded "
                         "gradients are checked at any size)";
    }
  }
  if (stop()) return a;
  if (recorded) {
    if (run.runs_differ()) {
      replay_digest.emplace();
      feed.emplace(data, rr.in->params, *rr.run, rr.baseline, replay, recorded_gradients,
                   settings.threads);
      stream_reference64(
          reference_inputs(data, replay_in->params), recorded_gradients, settings.threads,
          [&](const GroupReference& g) {
            feed->add(g);
            digest_zero_rows(streaming, g, *replay_digest);
          },
          settings.cancelled);
      if (stop()) return a;
    }
    a.recorded = feed->finish(conventions);
    if (data.info.config.run.inferred.any()) {  // judged under what the recording showed
      conventions.push_back(inferred_run_finding(data, data.info.config.run.inferred));
    }
    if (run.runs_differ()) {
      std::vector<Finding> unused;
      a.what_if_explains.emplace();
      for (const RecordedComparison& c : hypothesis_feed->finish(unused)) {
        // Reproduced: within the rule on some finite value (both all NaN proves nothing).
        if (c.within_rule && c.finite_pairs > 0) a.what_if_explains->push_back(c.tensor);
      }
    }
    // A bool mask of the opposite polarity: analysed again with the mask inverted.
    const RecordedComparison* o = comparison_of(a.recorded, "o");
    if (o != nullptr &&
        mask_polarity_inverted(data, o->within_rule, o->threshold, settings.threads)) {
      CaseData inverted = data;
      inverted.info.config.run.mask_convention = "masked_out";
      Result<CaseAnalysis> again = analyze_case(inverted, settings);
      if (again) {
        again->findings.push_back(mask_polarity_finding(data));
        group_findings(again->findings);
      }
      return again;
    }
    // Semantics the dump does not record, shown by the recorded o: judged again under them.
    if (o != nullptr && settings.infer_run && !data.info.config.run.inferred.any()) {
      const RunInference inferred =
          infer_run(data, *o, masks.fully_masked_rows > 0, settings.threads);
      if (inferred.run.any()) {
        // Judged again under it, this analysis' runs and references freed first; should the
        // recording still break the rule there, the case is judged as it was, without inferring.
        a = CaseAnalysis{};
        feed.reset();
        hypothesis_feed.reset();
        digest.reset();
        replay_digest.reset();
        rr = wr = RecordedReplay{};
        replay_in.reset();
        in = CaseInputs{};
        CaseData judged_as = data;
        apply_inferred_run(judged_as.info.config, inferred.run);
        Result<CaseAnalysis> again = analyze_case(judged_as, settings);
        if (!again) return again;
        // With a scale hint the recorded scale stays and o still breaks the rule under it.
        const RecordedComparison* judged = comparison_of(again->recorded, "o");
        if (judged != nullptr && (judged->within_rule || inferred.scale_hint)) {
          if (inferred.scale_hint) {
            again->findings.push_back(scale_hint_finding(data, *inferred.scale_hint));
          }
          group_findings(again->findings);
          return again;
        }
        AnalysisSettings as_it_was = settings;
        as_it_was.infer_run = false;
        return analyze_case(data, as_it_was);
      }
      if (inferred.scale_hint) {
        conventions.push_back(scale_hint_finding(data, *inferred.scale_hint));
      }
    }
  }
  if (stop()) return a;
  if (run.clip_norm) {
    for (const ModeRun& r : a.runs) {
      a.clips.push_back(make_clip_report(p, r, *run.clip_norm, run.clip_scope));
    }
  }

  const ReferenceDigest* reference = digest ? &*digest : nullptr;
  const ReferenceDigest* recorded_reference = !recorded       ? nullptr
                                              : replay_digest ? &*replay_digest
                                                              : reference;
  const AnalysisContext cx{data,       in,
                           settings,   a.runs,
                           masks,      reference,
                           a.recorded, a.clips,
                           replay,     recorded_reference,
                           rr.run,     run.runs_differ()};
  add_input_findings(cx, a.findings);
  a.stats.max_abs_qk = add_score_findings(cx, a.findings);
  add_forward_findings(cx, a.findings);
  add_gradient_findings(cx, a.findings);
  add_precision_findings(cx, a.findings);
  // A finding is a what-if when its runs are (a clip or a backend alone leaves them the replay).
  for (Finding& f : a.findings) f.what_if = run.runs_differ();
  add_recorded_findings(cx, a.findings);  // judged against the replay of the recorded run
  a.findings.insert(a.findings.end(), conventions.begin(), conventions.end());
  add_packed_findings(data, a.findings);
  group_findings(a.findings);
  name_packed_sequence(data.info, a.findings);

  for (const ModeRun& r : a.runs) a.stats.runs.push_back(run_stats(p, r));
  a.stats.fully_masked_rows = masks.fully_masked_rows;
  return a;
}

}  // namespace attnscope
