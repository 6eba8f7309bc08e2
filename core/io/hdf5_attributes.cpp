// Case-group attributes of schema 1: reading scalars written by h5py (variable-length UTF-8 and
// fixed-length strings, numpy bool enums, ints, floats) and writing them the way h5py does.
#include <cstdlib>

#include "core/io/case_fields.h"
#include "core/io/hdf5_common.h"
#include "kernels/attn_names.h"

namespace attnscope::h5 {

namespace {

herr_t collect_name(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

Error attribute_error(const std::string& where, const char* attr, const std::string& problem) {
  return make_error(ErrorCode::format, where + ": attribute '" + attr + "' " + problem,
                    "schema-1.1 attributes: scale/softcap/dropout_p floats, causal bool, "
                    "step/layer/micro_batch/forward_seq/backward_seq ints, "
                    "causal_align/dtype/layout/name/description/"
                    "torch_version/backend/device/autocast_dtype/mask_convention strings");
}

// An open attribute holding exactly one element.
Result<Handle> open_single(hid_t object, const char* attr, const std::string& where) {
  Handle a = attribute_handle(H5Aopen(object, attr, H5P_DEFAULT));
  if (!a) {
    error_detail();
    return attribute_error(where, attr, "cannot be opened");
  }
  Handle space = space_handle(H5Aget_space(a.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    return attribute_error(where, attr, "must hold a single value");
  }
  return Result<Handle>(std::move(a));
}

Status write_attribute(hid_t object, const char* attr, hid_t file_type, hid_t memory_type,
                       const void* value) {
  Handle space = space_handle(H5Screate(H5S_SCALAR));
  Handle a =
      attribute_handle(H5Acreate2(object, attr, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a || H5Awrite(a.get(), memory_type, value) < 0) {
    return make_error(ErrorCode::io,
                      std::string("cannot write attribute '") + attr + "': " + error_detail());
  }
  return Ok{};
}

}  // namespace

std::vector<std::string> attribute_names(hid_t object) {
  std::vector<std::string> names;
  hsize_t index = 0;
  if (H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_NATIVE, &index, collect_name, &names) < 0) {
    error_detail();
  }
  return names;
}

Result<std::string> read_string_attribute(hid_t object, const char* attr,
                                          const std::string& where) {
  auto a = open_single(object, attr, where);
  if (!a) return a.error();
  Handle type = type_handle(H5Aget_type(a->get()));
  if (H5Tget_class(type.get()) != H5T_STRING) {
    return attribute_error(where, attr, "is not a string");
  }
  std::string out;
  if (H5Tis_variable_str(type.get()) > 0) {
    Handle memory = utf8_string_type();
    H5Tset_cset(memory.get(), H5Tget_cset(type.get()));
    char* text = nullptr;
    if (H5Aread(a->get(), memory.get(), &text) < 0) {
      return attribute_error(where, attr, "cannot be read: " + error_detail());
    }
    if (text != nullptr) out = text;
    H5free_memory(text);
  } else {
    std::string buffer(H5Tget_size(type.get()), '\0');
    if (H5Aread(a->get(), type.get(), buffer.data()) < 0) {
      return attribute_error(where, attr, "cannot be read: " + error_detail());
    }
    out = buffer.substr(0, buffer.find('\0'));
    while (!out.empty() && out.back() == ' ') out.pop_back();
  }
  return out;
}

Result<double> read_number_attribute(hid_t object, const char* attr, const std::string& where) {
  auto a = open_single(object, attr, where);
  if (!a) return a.error();
  Handle type = type_handle(H5Aget_type(a->get()));
  const H5T_class_t cls = H5Tget_class(type.get());
  if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
    double value = 0;
    if (H5Aread(a->get(), H5T_NATIVE_DOUBLE, &value) < 0) {
      return attribute_error(where, attr, "cannot be read: " + error_detail());
    }
    return value;
  }
  if (cls == H5T_ENUM && H5Tget_size(type.get()) <= 8) {
    Handle memory = type_handle(H5Tget_native_type(type.get(), H5T_DIR_ASCEND));
    unsigned char bytes[8] = {0};
    if (H5Aread(a->get(), memory.get(), bytes) < 0) {
      return attribute_error(where, attr, "cannot be read: " + error_detail());
    }
    bool nonzero = false;
    for (unsigned char b : bytes) nonzero = nonzero || b != 0;
    return nonzero ? 1.0 : 0.0;
  }
  if (cls == H5T_STRING) {
    auto text = read_string_attribute(object, attr, where);
    if (!text) return text.error();
    const std::string t = ascii_lower(*text);
    if (t == "true") return 1.0;
    if (t == "false") return 0.0;
    char* end = nullptr;
    const double value = std::strtod(t.c_str(), &end);
    if (!t.empty() && end == t.c_str() + t.size()) return value;
  }
  return attribute_error(where, attr, "is not a number");
}

Result<CaseConfig> read_case_config(hid_t group, const std::string& where) {
  CaseConfig config;
  for (const std::string& name : attribute_names(group)) {
    if (!is_case_field(name)) continue;
    FieldValue value;
    if (is_text_field(name)) {
      auto text = read_string_attribute(group, name.c_str(), where);
      if (!text) return text.error();
      value = std::move(*text);
    } else {
      auto number = read_number_attribute(group, name.c_str(), where);
      if (!number) return number.error();
      value = *number;
    }
    Status set = set_case_field(config, name, value, where, "attribute");
    if (!set) return set.error();
  }
  return config;
}

Status write_string_attribute(hid_t object, const char* attr, const std::string& value) {
  Handle type = utf8_string_type();
  const char* text = value.c_str();
  return write_attribute(object, attr, type.get(), type.get(), &text);
}

Status write_double_attribute(hid_t object, const char* attr, double value) {
  return write_attribute(object, attr, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

Status write_int_attribute(hid_t object, const char* attr, int64_t value) {
  return write_attribute(object, attr, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

Status write_bool_attribute(hid_t object, const char* attr, bool value) {
  Handle type = bool_enum_type();
  const signed char v = value ? 1 : 0;
  return write_attribute(object, attr, type.get(), type.get(), &v);
}

Status write_case_config(hid_t group, const CaseConfig& c) {
  std::vector<Status> done;
  if (c.scale) done.push_back(write_double_attribute(group, "scale", *c.scale));
  done.push_back(write_bool_attribute(group, "causal", c.causal));
  if (c.causal_align != CausalAlign::top_left) {
    done.push_back(
        write_string_attribute(group, "causal_align", causal_align_name(c.causal_align)));
  }
  if (!c.dtype.empty()) done.push_back(write_string_attribute(group, "dtype", c.dtype));
  done.push_back(write_string_attribute(group, "layout", layout_name(c.layout)));
  if (c.softcap != 0) done.push_back(write_double_attribute(group, "softcap", c.softcap));
  if (c.step) done.push_back(write_int_attribute(group, "step", *c.step));
  if (c.layer) done.push_back(write_int_attribute(group, "layer", *c.layer));
  if (!c.name.empty()) done.push_back(write_string_attribute(group, "name", c.name));
  if (!c.description.empty()) {
    done.push_back(write_string_attribute(group, "description", c.description));
  }
  RunRecord run = c.run;
  for (const char* name : kRunTextFields) {
    const std::string& text = *run_text_field(run, name);
    if (!text.empty()) done.push_back(write_string_attribute(group, name, text));
  }
  if (run.dropout_p != 0) done.push_back(write_double_attribute(group, "dropout_p", run.dropout_p));
  if (run.micro_batch) done.push_back(write_int_attribute(group, "micro_batch", *run.micro_batch));
  if (run.forward_seq) done.push_back(write_int_attribute(group, "forward_seq", *run.forward_seq));
  if (run.backward_seq) {
    done.push_back(write_int_attribute(group, "backward_seq", *run.backward_seq));
  }
  for (Status& s : done) {
    if (!s) return s;
  }
  return Ok{};
}

}  // namespace attnscope::h5
