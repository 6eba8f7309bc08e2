// CaseOutcome to JSON and back, field for field.
#include "shard_verdicts.h"

#include <nlohmann/json.hpp>

#include "findings_json.h"

namespace attnscope {
namespace {

void write_optional(JsonWriter& json, const char* key, const std::optional<int64_t>& v) {
  json.key(key);
  if (v)
    json.value(*v);
  else
    json.null();
}

// False when `key` holds neither null nor an integer.
bool read_optional(const nlohmann::json& j, const char* key, std::optional<int64_t>& into) {
  const auto it = j.find(key);
  if (it == j.end()) return false;
  if (it->is_null()) return true;
  if (!it->is_number_integer()) return false;
  into = it->get<int64_t>();
  return true;
}

template <typename T>
bool read_field(const nlohmann::json& j, const char* key, T& into) {
  const auto it = j.find(key);
  if (it == j.end()) return false;
  try {
    into = it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return true;
}

bool read_range(const nlohmann::json& j, const char* key, IndexRange& into) {
  const auto it = j.find(key);
  if (it == j.end()) return false;
  if (it->is_null()) return true;
  std::vector<int64_t> pair;
  if (!read_field(j, key, pair) || pair.size() != 2) return false;
  into = IndexRange{pair[0], pair[1]};
  return true;
}

std::optional<NonfiniteSite> read_site(const nlohmann::json& j) {
  NonfiniteSite s;
  std::string stage;
  if (!j.is_object() || !read_field(j, "stage", stage) || !read_field(j, "kind", s.kind) ||
      !read_field(j, "view", s.view) || !read_field(j, "batch", s.batch) ||
      !read_field(j, "head", s.head) || !read_range(j, "rows", s.rows) ||
      !read_range(j, "cols", s.cols) || !read_field(j, "count", s.count) ||
      !read_field(j, "modes", s.modes) || !read_field(j, "message", s.message)) {
    return std::nullopt;
  }
  const std::optional<NonfiniteStage> named = nonfinite_stage_named(stage);
  if (!named) return std::nullopt;
  s.stage = *named;
  return s;
}

}  // namespace

void write_site(JsonWriter& json, const NonfiniteSite& site) {
  json.begin_object().field("stage", nonfinite_stage_name(site.stage)).field("kind", site.kind);
  json.field("view", site.view).field("batch", site.batch).field("head", site.head);
  write_range(json, "rows", site.rows);
  write_range(json, "cols", site.cols);
  json.field("count", site.count).field("modes", site.modes).field("message", site.message);
  json.end_object();
}

void write_verdict(JsonWriter& json, const CaseOutcome& v) {
  json.begin_object().field("path", v.path);
  write_optional(json, "rank", v.rank);
  write_optional(json, "step", v.step);
  write_optional(json, "micro_batch", v.micro_batch);
  write_optional(json, "layer", v.layer);
  json.field("forward_error", v.forward_error).field("backward_error", v.backward_error);
  json.field("dout_nonfinite", v.dout_nonfinite).field("input_nonfinite", v.input_nonfinite);
  json.field("kinds", v.kinds);
  json.field("forward_lead", v.forward_lead).field("backward_lead", v.backward_lead);
  json.field("forward_head", v.forward_head).field("backward_head", v.backward_head);
  json.key("nonfinite").begin_array();
  for (const NonfiniteSite& site : v.nonfinite) write_site(json, site);
  json.end_array();
  json.end_object();
}

std::optional<CaseOutcome> read_verdict(const nlohmann::json& j) {
  CaseOutcome v;
  if (!j.is_object() || !read_field(j, "path", v.path) || !read_optional(j, "rank", v.rank) ||
      !read_optional(j, "step", v.step) || !read_optional(j, "micro_batch", v.micro_batch) ||
      !read_optional(j, "layer", v.layer) || !read_field(j, "forward_error", v.forward_error) ||
      !read_field(j, "backward_error", v.backward_error) ||
      !read_field(j, "dout_nonfinite", v.dout_nonfinite) ||
      !read_field(j, "input_nonfinite", v.input_nonfinite) || !read_field(j, "kinds", v.kinds) ||
      !read_field(j, "forward_lead", v.forward_lead) ||
      !read_field(j, "backward_lead", v.backward_lead) ||
      !read_field(j, "forward_head", v.forward_head) ||
      !read_field(j, "backward_head", v.backward_head)) {
    return std::nullopt;
  }
  const auto sites = j.find("nonfinite");
  if (sites == j.end() || !sites->is_array()) return std::nullopt;
  for (const nlohmann::json& entry : *sites) {
    std::optional<NonfiniteSite> site = read_site(entry);
    if (!site) return std::nullopt;
    v.nonfinite.push_back(std::move(*site));
  }
  return v;
}

}  // namespace attnscope
