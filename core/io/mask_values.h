// The values a boolean mask may hold. A mask (and a dropout keep-mask) is read with bool
// semantics, True = attend / keep: stored as bool, uint8 or another integer type it must hold
// only 0 and 1. Any other value (2, -1, 255) is refused instead of being read as "nonzero =
// attend": it is usually an additive bias or an index array stored under the wrong name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace attnscope {

// Checks `count` integers of `element_size` bytes (1, 2, 4 or 8; native byte order, signed or
// not) laid out row-major in `shape`. nullopt when each is 0 or 1; else a format Error naming
// `where` ("FILE: /case/mask"), the first other value and its index, with a hint.
std::optional<Error> check_mask_values(const uint8_t* elements, size_t count, size_t element_size,
                                       bool is_signed, const std::vector<int64_t>& shape,
                                       const std::string& where);

}  // namespace attnscope
