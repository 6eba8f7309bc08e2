// Findings, stats and analysis config as JSON.
#include "findings_json.h"

#include <algorithm>
#include <cmath>

#include "case_format.h"
#include "cli_options.h"

namespace attnscope {
namespace {

void write_index(JsonWriter& json, const char* key, int64_t index) {
  json.key(key);
  if (index >= 0)
    json.value(index);
  else
    json.null();
}

void write_tally(JsonWriter& json, const char* key, const CellCounts& t) {
  json.key(key).begin_object();
  json.field("nan", t.nan).field("pos_inf", t.pos_inf).field("neg_inf", t.neg_inf);
  json.end_object();
}

void write_head_norms(JsonWriter& json, const char* key, const GradientNorms& n) {
  json.key(key).begin_object();
  json.field("dq", n.dq_head).field("dk", n.dk_head).field("dv", n.dv_head);
  json.end_object();
}

void write_config(JsonWriter& json, const CaseInfo& info, const CaseAnalysis& a,
                  const AnalysisSettings& settings) {
  json.key("config").begin_object();
  write_case_config_fields(json, info);
  json.field("run_scale", a.params.scale);
  json.field("precision", precision_name(a.params.precision));
  json.key("modes").begin_array();
  for (const ModeRun& r : a.runs) json.value(run_name(r));
  json.end_array();
  json.field("mask_fill", mask_fill_name(a.params.mask_fill));
  json.key("clip_norm");
  if (settings.run.clip_norm)
    json.value(*settings.run.clip_norm);
  else
    json.null();
  json.field("what_if", a.what_if).field("judged_under", a.judged_under);
  if (a.what_if_explains) {  // the hypothesis test: recorded outputs the what-if reproduces
    json.key("what_if_explains").begin_array();
    for (const std::string& name : *a.what_if_explains) json.value(name);
    json.end_array();
  }
  json.end_object();
}

// What the recorded run did and how it is replayed (core/replay.h).
void write_replay(JsonWriter& json, const CaseInfo& info, const Replay& r) {
  const RunRecord& run = info.config.run;
  json.key("replay").begin_object();
  json.field("backend", run.backend).field("torch_version", run.torch_version);
  json.field("backend_known", r.backend_known);
  json.key("modes").begin_array();
  for (Mode m : r.modes) json.value(m == Mode::fused && r.upcast ? "upcast" : mode_name(m));
  json.end_array();
  json.field("precision", precision_name(r.precision));
  json.field("mask_fill", mask_fill_name(r.mask_fill));
  json.field("backward_p", r.backward_p == BackwardP::from_lse ? "from_lse" : "saved");
  json.field("dropout", r.dropout == DropoutReplay::none   ? "none"
                        : r.dropout == DropoutReplay::mask ? "mask"
                                                           : "unavailable");
  json.field("exact", r.exact());
  json.key("inferred").begin_object();  // what the recorded o showed where the dump is silent
  json.key("mask_fill");
  if (r.inferred.mask_fill)
    json.value(mask_fill_name(*r.inferred.mask_fill));
  else
    json.null();
  json.key("scale");
  if (r.inferred.scale)
    json.value(*r.inferred.scale);
  else
    json.null();
  json.end_object();
  json.field("text", r.text);
  json.end_object();
}

void write_stats(JsonWriter& json, const CaseAnalysis& a) {
  json.key("stats").begin_object();
  json.field("fully_masked_rows", a.stats.fully_masked_rows);
  json.field("reference_note", a.reference_note);
  json.key("max_abs_qk");
  if (a.stats.max_abs_qk)
    json.value(*a.stats.max_abs_qk);
  else
    json.null();
  json.key("runs").begin_array();
  for (const RunStats& r : a.stats.runs) {
    json.begin_object();
    json.field("mode", r.upcast ? "upcast" : mode_name(r.mode));
    json.field("precision", precision_name(r.precision));
    json.field("max_abs_s", r.max_abs_s).field("min_lse", r.min_lse).field("max_lse", r.max_lse);
    json.key("nonfinite").begin_object();
    write_tally(json, "o", r.o);
    write_tally(json, "lse", r.lse);
    write_tally(json, "dq", r.dq);
    write_tally(json, "dk", r.dk);
    write_tally(json, "dv", r.dv);
    json.end_object();
    json.field("grad_norm", r.norms.total);
    write_head_norms(json, "head_grad_norms", r.norms);
    json.end_object();
  }
  json.end_array();
  json.key("recorded").begin_array();
  for (const RecordedComparison& c : a.recorded) {
    double min_cosine = 1, worst_ratio = 1;
    for (const HeadComparison& h : c.heads) {
      min_cosine = std::min(min_cosine, h.cosine);
      if (std::fabs(std::log(h.norm_ratio)) > std::fabs(std::log(worst_ratio)))
        worst_ratio = h.norm_ratio;
    }
    json.begin_object();
    json.field("tensor", c.tensor).field("within_rule", c.within_rule);
    json.field("max_error", c.max_error).field("threshold", c.threshold);
    json.field("min_cosine", min_cosine).field("worst_norm_ratio", worst_ratio);
    json.field("column_max_error", c.column_max_error);
    json.end_object();
  }
  json.end_array();
  json.key("clip").begin_array();
  for (const ClipReport& c : a.clips) {
    json.begin_object();
    json.field("mode", mode_name(c.mode));
    json.field("scope", c.scope == ClipScope::whole_case ? "case" : "kv_head");
    json.field("max_norm", c.max_norm).field("total_norm", c.before.total);
    json.key("coef").begin_array();
    for (const ClipResult& r : c.clips) json.value(r.coef);
    json.end_array();
    bool nonfinite = false;
    for (const ClipResult& r : c.clips) nonfinite = nonfinite || r.nonfinite_total;
    json.field("nonfinite_total", nonfinite);
    write_head_norms(json, "head_norms_before", c.before);
    write_head_norms(json, "head_norms_after", c.after);
    json.field("total_norm_after", c.after.total);
    json.end_object();
  }
  json.end_array();
  json.end_object();
}

}  // namespace

void write_range(JsonWriter& json, const char* key, const IndexRange& r) {
  json.key(key);
  if (r.valid())
    json.value(std::vector<int64_t>{r.first, r.last});
  else
    json.null();
}

void write_finding(JsonWriter& json, const Finding& f) {
  json.begin_object();
  json.field("kind", finding_kind_name(f.kind)).field("severity", severity_name(f.severity));
  json.field("tensor", f.tensor);
  write_index(json, "batch", f.batch);
  write_index(json, "head", f.head);
  write_range(json, "rows", f.rows);
  write_range(json, "cols", f.cols);
  json.field("count", f.count).field("message", f.message).field("remedy", f.remedy);
  write_range(json, "heads", f.heads);
  json.key("precision");
  if (f.precision.empty())
    json.null();
  else
    json.value(f.precision);
  json.key("modes").begin_array();
  for (const std::string& m : f.modes) json.value(m);
  json.end_array();
  json.field("judged_under", f.what_if ? "what-if" : "recorded");
  json.key("locations").begin_array();
  for (const FindingLocation& l : f.locations) {
    json.begin_object();
    write_index(json, "batch", l.batch);
    write_index(json, "head", l.head);
    write_range(json, "heads", l.heads);
    write_range(json, "rows", l.rows);
    write_range(json, "cols", l.cols);
    json.field("count", l.count);
    json.end_object();
  }
  json.end_array();
  json.end_object();
}

void write_case_analysis(JsonWriter& json, const CaseInfo& info, const CaseAnalysis& a,
                         const AnalysisSettings& settings, const CaseOrigin* origin) {
  json.begin_object();
  if (origin != nullptr) json.field("file", origin->file).field("rank", origin->rank);
  json.field("path", info.path);
  json.field("name", info.config.name);
  write_case_shape(json, info.dims);
  write_config(json, info, a, settings);
  write_replay(json, info, a.replay);
  write_stats(json, a);
  json.key("findings").begin_array();
  for (const Finding& f : a.findings) write_finding(json, f);
  json.end_array();
  json.end_object();
}

}  // namespace attnscope
