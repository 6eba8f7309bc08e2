// Text and JSON pieces every command prints about a case: compact numbers, the shape line
// ("B=2 H=8 Sq=1024 D=64") and the "shape" / "config" JSON objects of DESIGN §4.
#pragma once

#include <string>

#include "core/case_model.h"
#include "json_writer.h"

namespace attnscope {

std::string format_number(double x);  // %.6g
std::string dims_text(const CaseDims& d);

// "shape": {"batch": .., "heads": .., "kv_heads": .., "seqlen_q": .., ...}
void write_case_shape(JsonWriter& json, const CaseDims& d);
// The config fields of the case (scale, causal, dtype, layout, softcap, step, layer) into the
// currently open object.
void write_case_config_fields(JsonWriter& json, const CaseInfo& c);

}  // namespace attnscope
