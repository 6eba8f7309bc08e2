// Checking that a stored mask holds only 0 and 1 (see mask_values.h).
#include "core/io/mask_values.h"

#include <cstring>

namespace attnscope {

namespace {

// Element `i` as a 64-bit value (an unsigned 8-byte one keeps its bits).
int64_t element_value(const uint8_t* elements, size_t i, size_t size, bool is_signed) {
  const uint8_t* p = elements + i * size;
  switch (size) {
    case 1:
      return is_signed ? int64_t{static_cast<int8_t>(*p)} : int64_t{*p};
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return is_signed ? int64_t{static_cast<int16_t>(v)} : int64_t{v};
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return is_signed ? int64_t{static_cast<int32_t>(v)} : int64_t{v};
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

// "[0, 2, 5, 1]": the row-major index `flat` in `shape`.
std::string index_text(size_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    const auto extent = static_cast<size_t>(shape[d] > 0 ? shape[d] : 1);
    index[d] = static_cast<int64_t>(flat % extent);
    flat /= extent;
  }
  std::string out = "[";
  for (size_t d = 0; d < index.size(); ++d) out += (d ? ", " : "") + std::to_string(index[d]);
  return out + "]";
}

}  // namespace

std::optional<Error> check_mask_values(const uint8_t* elements, size_t count, size_t element_size,
                                       bool is_signed, const std::vector<int64_t>& shape,
                                       const std::string& where) {
  for (size_t i = 0; i < count; ++i) {
    const int64_t v = element_value(elements, i, element_size, is_signed);
    if (v == 0 || v == 1) continue;
    const std::string value =
        is_signed ? std::to_string(v) : std::to_string(static_cast<uint64_t>(v));
    return make_error(ErrorCode::format,
                      where + ": holds " + value + " at " + index_text(i, shape) +
                          "; a mask holds only 0 / 1 (False / True, True = attend)",
                      "store a boolean mask as bool (True = attend, as SDPA's attn_mask); "
                      "additive values (0 / -inf, or -10000 for padding) belong in 'bias' as "
                      "floats");
  }
  return std::nullopt;
}

}  // namespace attnscope
