// Shape text and the shape / config JSON of a case.
#include "case_format.h"

#include <cstdio>
#include <sstream>

#include "kernels/attn_names.h"

namespace attnscope {

std::string format_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string dims_text(const CaseDims& d) {
  std::ostringstream out;
  out << "B=" << d.batch << " H=" << d.heads;
  if (d.kv_heads != d.heads) out << " Hk=" << d.kv_heads;
  out << " Sq=" << d.seqlen_q;
  if (d.seqlen_k != d.seqlen_q) out << " Sk=" << d.seqlen_k;
  out << " D=" << d.head_dim;
  if (d.head_dim_v != d.head_dim) out << " Dv=" << d.head_dim_v;
  return out.str();
}

void write_case_shape(JsonWriter& json, const CaseDims& d) {
  json.key("shape").begin_object();
  json.field("batch", d.batch).field("heads", d.heads).field("kv_heads", d.kv_heads);
  json.field("seqlen_q", d.seqlen_q).field("seqlen_k", d.seqlen_k);
  json.field("head_dim", d.head_dim).field("head_dim_v", d.head_dim_v);
  json.field("q_broadcast", d.q_broadcast).field("kv_broadcast", d.kv_broadcast);
  json.end_object();
}

void write_case_config_fields(JsonWriter& json, const CaseInfo& c) {
  const CaseConfig& cfg = c.config;
  json.field("scale", cfg.effective_scale(c.dims.head_dim));
  json.field("scale_from_file", cfg.scale.has_value());
  json.field("causal", cfg.causal);
  json.field("causal_align", causal_align_name(cfg.causal_align));
  json.key("dtype");
  if (cfg.dtype.empty())
    json.null();
  else
    json.value(cfg.dtype);
  json.field("layout", layout_name(cfg.layout));
  json.field("softcap", cfg.softcap);
  json.key("step");
  if (cfg.step)
    json.value(*cfg.step);
  else
    json.null();
  json.key("layer");
  if (cfg.layer)
    json.value(*cfg.layer);
  else
    json.null();
  // The run record (schema 1.1; empty strings / null where the dump says nothing).
  const RunRecord& run = cfg.run;
  json.key("run").begin_object();
  json.field("torch_version", run.torch_version).field("backend", run.backend);
  json.field("device", run.device).field("autocast_dtype", run.autocast_dtype);
  json.field("dropout_p", run.dropout_p).field("dropout_replay", run.dropout_replay);
  json.field("mask_convention", run.mask_convention);
  json.key("micro_batch");
  if (run.micro_batch)
    json.value(*run.micro_batch);
  else
    json.null();
  json.field("library_version", run.library_version).field("score_mod", run.score_mod);
  json.field("score_mod_replay", run.score_mod_replay);
  json.field("score_mod_note", run.score_mod_note);
  json.end_object();
  // A sequence of a packed group: its place in the group (token ranges [begin, end)).
  if (!c.packed) {
    json.key("packed").null();
    return;
  }
  const PackedSequence& p = *c.packed;
  json.key("packed").begin_object();
  json.field("group", p.group).field("index", p.index).field("count", p.count);
  json.key("q_tokens").begin_array().value(p.q_begin).value(p.q_end).end_array();
  json.key("k_tokens").begin_array().value(p.k_begin).value(p.k_end).end_array();
  json.end_object();
}

}  // namespace attnscope
