// Element-type mapping between HDF5 datatypes and DType: IEEE half (not predefined in HDF5
// 1.10, recognised by its bit layout), bfloat16 (uint16 + dtype attribute, 2-byte opaque tagged
// bfloat16, or a 2-byte float with the bfloat16 layout), float32/64, and h5py's bool enum.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "core/io/hdf5_common.h"

namespace attnscope::h5 {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool names_bfloat16(const std::string& text) {
  const std::string t = lower(text);
  return t.find("bfloat16") != std::string::npos || t == "bf16" || t == "torch.bf16";
}

bool names_float16(const std::string& text) {
  const std::string t = lower(text);
  return t == "float16" || t == "torch.float16" || t == "half" || t == "torch.half" || t == "fp16";
}

// Copy of a 4-byte IEEE float re-laid as 2 bytes: sign 15, exponent at `epos` of `esize` bits,
// mantissa at 0 of `msize` bits (how h5py builds float16).
Handle two_byte_float(size_t epos, size_t esize, size_t msize, size_t ebias) {
  Handle t = type_handle(H5Tcopy(H5T_IEEE_F32LE));
  H5Tset_fields(t.get(), 15, epos, esize, 0, msize);
  H5Tset_size(t.get(), 2);
  H5Tset_ebias(t.get(), ebias);
  return t;
}

Handle bf16_float_type() {
  return two_byte_float(7, 8, 7, 127);
}

Handle bf16_opaque_type() {
  Handle t = type_handle(H5Tcreate(H5T_OPAQUE, 2));
  H5Tset_tag(t.get(), "bfloat16");
  return t;
}

bool has_float_layout(hid_t type, size_t epos, size_t esize, size_t msize, size_t ebias) {
  size_t spos = 0, ep = 0, es = 0, mp = 0, ms = 0;
  if (H5Tget_fields(type, &spos, &ep, &es, &mp, &ms) < 0) return false;
  return spos == 15 && ep == epos && es == esize && mp == 0 && ms == msize &&
         H5Tget_ebias(type) == ebias;
}

// h5py's numpy-bool type: an enum over a 1-byte integer with members FALSE = 0, TRUE = 1.
bool is_bool_enum(hid_t type) {
  if (H5Tget_nmembers(type) != 2 || H5Tget_size(type) != 1) return false;
  for (unsigned i = 0; i < 2; ++i) {
    char* name = H5Tget_member_name(type, i);
    if (name == nullptr) return false;
    const std::string n = lower(name);
    H5free_memory(name);
    signed char value = 0;
    if (H5Tget_member_value(type, i, &value) < 0) return false;
    if (!((n == "false" && value == 0) || (n == "true" && value == 1))) return false;
  }
  return true;
}

std::string opaque_tag(hid_t type) {
  char* tag = H5Tget_tag(type);
  if (tag == nullptr) return {};
  std::string out = tag;
  H5free_memory(tag);
  return out;
}

std::string integer_name(hid_t type) {
  const bool is_signed = H5Tget_sign(type) != H5T_SGN_NONE;
  return (is_signed ? "int" : "uint") + std::to_string(8 * H5Tget_size(type));
}

const char* class_name(H5T_class_t cls) {
  switch (cls) {
    case H5T_STRING:
      return "string";
    case H5T_COMPOUND:
      return "compound";
    case H5T_VLEN:
      return "variable-length";
    case H5T_ARRAY:
      return "array";
    case H5T_REFERENCE:
      return "reference";
    case H5T_BITFIELD:
      return "bitfield";
    case H5T_TIME:
      return "time";
    case H5T_OPAQUE:
      return "opaque";
    case H5T_ENUM:
      return "enum";
    default:
      return "unknown";
  }
}

ElementMapping mapping(DType dtype, Handle memory_type, bool to_boolean = false) {
  ElementMapping m;
  m.dtype = dtype;
  m.memory_size = H5Tget_size(memory_type.get());
  m.memory_type = std::move(memory_type);
  m.to_boolean = to_boolean;
  return m;
}

ElementMapping native(DType dtype, hid_t predefined) {
  return mapping(dtype, type_handle(H5Tcopy(predefined)));
}

}  // namespace

Result<ElementMapping> map_element_type(hid_t file_type, const std::string& name,
                                        const std::string& bf16_tag, const std::string& file,
                                        const std::string& object) {
  const H5T_class_t cls = H5Tget_class(file_type);
  const size_t size = H5Tget_size(file_type);
  const bool is_mask = is_bool_tensor(name);
  const bool tagged_bf16 = names_bfloat16(bf16_tag);
  const bool tagged_f16 = names_float16(bf16_tag);
  const std::string float_hint = "re-export " + name +
                                 " with h5py as float16/float32 (bfloat16 as uint16 with attribute "
                                 "dtype=\"bfloat16\")";
  auto reject = [&](const std::string& problem, const std::string& hint) {
    return dataset_error(ErrorCode::format, file, object, problem, hint);
  };
  if ((tagged_bf16 || tagged_f16) && size != 2) {
    return reject(std::to_string(size) + "-byte elements tagged dtype=\"" + bf16_tag + "\" (" +
                      (tagged_bf16 ? "bfloat16" : "float16") + " has 2 bytes)",
                  "store the 16-bit bits (tensor.view(torch.int16)) or drop the tag");
  }
  switch (cls) {
    case H5T_FLOAT:
      if (size == 4) return native(DType::f32, H5T_NATIVE_FLOAT);
      if (size == 8) return native(DType::f64, H5T_NATIVE_DOUBLE);
      if (size == 2 && has_float_layout(file_type, 10, 5, 10, 15) && !tagged_bf16) {
        return mapping(DType::f16, half_type());
      }
      if (size == 2 && has_float_layout(file_type, 7, 8, 7, 127)) {
        return mapping(DType::bf16, bf16_float_type());
      }
      return reject(std::to_string(size) +
                        "-byte floating-point type is not float16, bfloat16, "
                        "float32 or float64",
                    float_hint);
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(file_type) != H5T_SGN_NONE;
      if (is_index_tensor(name) && (size == 4 || size == 8)) {
        return size == 4 ? native(DType::i32, H5T_NATIVE_INT32)
                         : native(DType::i64, H5T_NATIVE_INT64);
      }
      if (is_mask && size == 1 && !is_signed) return native(DType::u8, H5T_NATIVE_UINT8);
      if (is_mask) {
        ElementMapping m =
            mapping(DType::u8, type_handle(H5Tget_native_type(file_type, H5T_DIR_ASCEND)), true);
        m.is_signed = is_signed;
        return m;
      }
      // 16-bit float bits kept in an integer dataset (t.view(torch.int16) or torch.uint16):
      // read with the dataset's own signedness, so every bit pattern comes back unchanged.
      if (size == 2 && (tagged_bf16 || tagged_f16)) {
        return native(tagged_bf16 ? DType::bf16 : DType::f16,
                      is_signed ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16);
      }
      return reject("integer element type " + integer_name(file_type) +
                        " where floating-point values are expected",
                    float_hint);
    }
    case H5T_ENUM:
      if (!is_bool_enum(file_type)) {
        return reject("enum element type that is not h5py's bool (FALSE/TRUE)",
                      is_mask ? "write the mask as numpy bool or uint8" : float_hint);
      }
      if (is_mask) {
        return mapping(DType::boolean, type_handle(H5Tget_native_type(file_type, H5T_DIR_ASCEND)),
                       true);
      }
      return reject("bool element type where floating-point values are expected", float_hint);
    case H5T_OPAQUE: {
      const std::string tag = opaque_tag(file_type);
      if (!names_bfloat16(tag)) {
        return reject("opaque element type with tag '" + tag + "'", float_hint);
      }
      if (size != 2) {
        return reject(std::to_string(size) + "-byte opaque elements tagged '" + tag +
                          "' (bfloat16 has 2 bytes)",
                      float_hint);
      }
      return mapping(DType::bf16, type_handle(H5Tcopy(file_type)));
    }
    default:
      return reject(std::string(class_name(cls)) + " element type where numbers are expected",
                    float_hint);
  }
}

Handle half_type() {
  return two_byte_float(10, 5, 10, 15);
}

Handle bool_enum_type() {
  Handle t = type_handle(H5Tenum_create(H5T_NATIVE_INT8));
  const signed char no = 0, yes = 1;
  H5Tenum_insert(t.get(), "FALSE", &no);
  H5Tenum_insert(t.get(), "TRUE", &yes);
  return t;
}

Handle utf8_string_type() {
  Handle t = type_handle(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

Handle file_type_for(DType dtype, Bf16Storage bf16) {
  switch (dtype) {
    case DType::f16:
      return half_type();
    case DType::bf16:
      if (bf16 == Bf16Storage::opaque) return bf16_opaque_type();
      return type_handle(H5Tcopy(H5T_STD_U16LE));
    case DType::f32:
      return type_handle(H5Tcopy(H5T_IEEE_F32LE));
    case DType::f64:
      return type_handle(H5Tcopy(H5T_IEEE_F64LE));
    case DType::u8:
      return type_handle(H5Tcopy(H5T_STD_U8LE));
    case DType::boolean:
      return bool_enum_type();
    case DType::i32:
      return type_handle(H5Tcopy(H5T_STD_I32LE));
    case DType::i64:
      return type_handle(H5Tcopy(H5T_STD_I64LE));
  }
  return {};
}

}  // namespace attnscope::h5
