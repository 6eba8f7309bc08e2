// Case fields of schema 1.1 from file scalars (see case_fields.h).
#include "core/io/case_fields.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "kernels/attn_names.h"

namespace attnscope {

namespace {

Error field_error(const std::string& where, const char* kind, const std::string& name,
                  const std::string& problem) {
  return make_error(ErrorCode::format, where + ": " + kind + " '" + name + "' " + problem,
                    std::string("schema-1.1 ") + kind +
                        "s: scale/softcap/dropout_p floats, causal bool, "
                        "step/layer/micro_batch/forward_seq/backward_seq ints, "
                        "causal_align/dtype/layout/name/description/"
                        "torch_version/backend/device/autocast_dtype/mask_convention strings");
}

std::string normalise_dtype(std::string text) {
  text = ascii_lower(text);
  for (const char* prefix : {"torch.", "numpy.", "np."}) {
    if (text.rfind(prefix, 0) == 0) text = text.substr(std::string(prefix).size());
  }
  if (text == "float16" || text == "half" || text == "fp16" || text == "f16") return "float16";
  if (text == "bfloat16" || text == "bf16") return "bfloat16";
  if (text == "float32" || text == "float" || text == "fp32" || text == "f32") return "float32";
  if (text == "float64" || text == "double" || text == "fp64" || text == "f64") return "float64";
  return {};
}

bool is_count_field(const std::string& name) {
  return name == "micro_batch" || name == "forward_seq" || name == "backward_seq";
}

bool is_number_field(const std::string& name) {
  return name == "scale" || name == "softcap" || name == "causal" || name == "step" ||
         name == "layer" || name == "dropout_p" || is_count_field(name);
}

// dropout_p in [0, 1); micro_batch, forward_seq, backward_seq non-negative integers.
bool run_number_valid(const std::string& name, double x) {
  if (name == "dropout_p") return x >= 0 && x < 1;
  return x >= 0 && x == std::floor(x) && x < 9.0e15;
}

Status set_number(CaseConfig& config, const std::string& name, double x, const std::string& where,
                  const char* kind) {
  if (name == "dropout_p" || is_count_field(name)) {
    if (!run_number_valid(name, x)) {
      return field_error(where, kind, name, "= " + std::to_string(x) + " is out of range");
    }
    if (name == "dropout_p") config.run.dropout_p = x;
    if (name == "micro_batch") config.run.micro_batch = static_cast<int64_t>(x);
    if (name == "forward_seq") config.run.forward_seq = static_cast<int64_t>(x);
    if (name == "backward_seq") config.run.backward_seq = static_cast<int64_t>(x);
    return Ok{};
  }
  if ((name == "scale" || name == "softcap") && !std::isfinite(x)) {
    return make_error(
        ErrorCode::format,
        where + ": " + kind + " '" + name + "' = " + std::to_string(x) + " is not a finite number",
        "fix the recorder (a non-finite " + name +
            " makes every score non-finite); override it with --scale, or "
            "drop the " +
            kind + " to use the default");
  }
  if (name == "scale") config.scale = x;
  if (name == "softcap") config.softcap = x;
  if (name == "causal") config.causal = x != 0;
  if (name != "step" && name != "layer") return Ok{};
  if (!std::isfinite(x) || x != std::floor(x) || std::fabs(x) > 9.0e15) {
    return field_error(where, kind, name, "= " + std::to_string(x) + " is not an integer");
  }
  (name == "step" ? config.step : config.layer) = static_cast<int64_t>(x);
  return Ok{};
}

Status set_text(CaseConfig& config, const std::string& name, const std::string& text,
                const std::string& where, const char* kind) {
  if (std::string* field = run_text_field(config.run, name)) {
    *field = name == "autocast_dtype" ? normalise_dtype(text) : text;
    if (name == "mask_convention" && text != "attend" && text != "masked_out" &&
        text != "additive") {
      return field_error(where, kind, name,
                         "= '" + text + "' is not attend, masked_out or additive");
    }
  } else if (name == "name") {
    config.name = text;
  } else if (name == "description") {
    config.description = text;
  } else if (name == "causal_align") {
    std::string t = ascii_lower(text);
    for (char& c : t) c = c == '-' ? '_' : c;
    const char* top_left = causal_align_name(CausalAlign::top_left);
    const char* bottom_right = causal_align_name(CausalAlign::bottom_right);
    if (t != top_left && t != bottom_right) {
      return field_error(where, kind, name,
                         "= '" + text + "' is not " + top_left + " or " + bottom_right);
    }
    config.causal_align = t == top_left ? CausalAlign::top_left : CausalAlign::bottom_right;
  } else if (name == "dtype") {
    config.dtype = normalise_dtype(text);
    if (config.dtype.empty()) {
      return field_error(where, kind, name,
                         "= '" + text + "' is not float32, float16, bfloat16 or float64");
    }
  } else if (name == "layout") {
    auto layout = parse_layout(text);
    if (!layout)
      return field_error(where, kind, name, "= '" + text + "' is not BHSD, BSHD, HSD, SD or THD");
    config.layout = *layout;
  }
  return Ok{};
}

}  // namespace

std::string* run_text_field(RunRecord& run, const std::string& name) {
  if (name == "torch_version") return &run.torch_version;
  if (name == "backend") return &run.backend;
  if (name == "device") return &run.device;
  if (name == "autocast_dtype") return &run.autocast_dtype;
  if (name == "dropout_replay") return &run.dropout_replay;
  if (name == "dropout_note") return &run.dropout_note;
  if (name == "mask_convention") return &run.mask_convention;
  if (name == "library_version") return &run.library_version;
  if (name == "score_mod") return &run.score_mod;
  if (name == "score_mod_replay") return &run.score_mod_replay;
  if (name == "score_mod_note") return &run.score_mod_note;
  return nullptr;
}

std::string ascii_lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool is_text_field(const std::string& name) {
  RunRecord run;
  return run_text_field(run, name) != nullptr || name == "causal_align" || name == "dtype" ||
         name == "layout" || name == "name" || name == "description";
}

bool is_case_field(const std::string& name) {
  return is_number_field(name) || is_text_field(name);
}

Status set_case_field(CaseConfig& config, const std::string& name, const FieldValue& value,
                      const std::string& where, const char* kind) {
  if (is_text_field(name)) {
    if (const auto* text = std::get_if<std::string>(&value)) {
      return set_text(config, name, *text, where, kind);
    }
    return field_error(where, kind, name, "is not a string");
  }
  if (!is_number_field(name)) return Ok{};
  if (const double* x = std::get_if<double>(&value))
    return set_number(config, name, *x, where, kind);
  const std::string t = ascii_lower(std::get<std::string>(value));
  if (t == "true" || t == "false") return set_number(config, name, t == "true", where, kind);
  char* end = nullptr;
  const double x = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size())
    return field_error(where, kind, name, "is not a number");
  return set_number(config, name, x, where, kind);
}

}  // namespace attnscope
