// The case configuration fields of schema 1.1 (DESIGN §2: scale, causal, layout, step, the run
// record, ...) set from the scalars a file carries: HDF5 group attributes, the scalar entries
// of a .pt dict, 0-d arrays of an .npz, the metadata of a .safetensors header. One set of
// rules and messages for every reader.
#pragma once

#include <string>
#include <variant>

#include "core/case_model.h"
#include "core/result.h"

namespace attnscope {

// A scalar as a file holds it: a number (bools as 0 / 1) or text.
using FieldValue = std::variant<double, std::string>;

// True for the names of case fields ("scale", "causal", "layout", "torch_version", ...).
bool is_case_field(const std::string& name);
// True for the fields holding text (layout, dtype, name, backend, ...); the rest are numbers.
bool is_text_field(const std::string& name);

// Sets field `name` of `config` from `value`. Text given for a number field is parsed ("0.125",
// "true", "False"); a number for a text field is an error. Errors (format) read
// "WHERE: KIND 'name' problem" (KIND "attribute" for HDF5, "key" for the other formats), e.g.
// "f.h5: /case: attribute 'scale' = nan is not a finite number", with a hint listing the
// fields. Names that are not case fields are ignored.
Status set_case_field(CaseConfig& config, const std::string& name, const FieldValue& value,
                      const std::string& where, const char* kind);

// The names of the run record's text fields, as attributes / keys.
inline constexpr const char* kRunTextFields[] = {
    "torch_version",  "backend",          "device",          "autocast_dtype",
    "dropout_replay", "dropout_note",     "mask_convention", "library_version",
    "score_mod",      "score_mod_replay", "score_mod_note"};

// The text field of the run record named `name` ("backend" -> &run.backend); nullptr for the
// other fields.
std::string* run_text_field(RunRecord& run, const std::string& name);

// "Float16" -> "float16", ASCII only.
std::string ascii_lower(std::string text);

}  // namespace attnscope
