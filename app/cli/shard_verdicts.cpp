// CaseOutcome to JSON and back, field for field.
#include "shard_verdicts.h"

#include <nlohmann/json.hpp>

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

}  // namespace

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
  return v;
}

}  // namespace attnscope
