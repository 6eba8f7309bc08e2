// The verdict of each case (core/analysis/first_bad_case.h) as a `scan --shard` report carries
// it, so that `merge` finds the first bad case of all shards without the cases' analyses.
#pragma once

#include <optional>

#include <nlohmann/json_fwd.hpp>

#include "core/analysis/first_bad_case.h"
#include "json_writer.h"

namespace attnscope {

// {"path", "rank", "step", "micro_batch", "layer", "forward_error", "backward_error",
//  "dout_nonfinite", "input_nonfinite", "kinds", "forward_lead", "backward_lead",
//  "forward_head", "backward_head", "nonfinite": [site, ...]}; absent optionals are null.
void write_verdict(JsonWriter& json, const CaseOutcome& v);
// A NonfiniteSite: {"stage", "kind", "view", "batch", "head", "rows", "cols", "count", "modes",
// "message"}; rows / cols [first, last] or null.
void write_site(JsonWriter& json, const NonfiniteSite& site);
// nullopt when `j` is not such an object.
std::optional<CaseOutcome> read_verdict(const nlohmann::json& j);

}  // namespace attnscope
