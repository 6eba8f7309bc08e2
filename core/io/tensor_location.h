// Where the elements of one stored tensor lie in a .pt / .npz / .safetensors file (a byte
// offset and element strides inside a zip member or the file itself), and the strided gather
// that turns those bytes into a dense row-major HostTensor. HDF5 datasets need none of this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/host_tensor.h"

namespace attnscope {

struct TensorLocation {
  std::string entry;             // zip member ("archive/data/3", "q.npy"); "" = the file itself
  int64_t offset = 0;            // byte offset of element [0, ..., 0] within the entry / file
  std::vector<int64_t> strides;  // in elements, one per stored dim (>= 0; 0 = broadcast)
  bool big_endian = false;       // elements stored big-endian (numpy '>f4', byteorder "big")

  bool operator==(const TensorLocation& o) const {
    return entry == o.entry && offset == o.offset && strides == o.strides &&
           big_endian == o.big_endian;
  }
};

// "[2, 8, 128, 64]".
std::string shape_text(const std::vector<int64_t>& shape);

// Row-major element strides of `shape` ([2, 3, 4] -> [12, 4, 1]).
std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape);

// The bytes of the entry a tensor's elements touch: from `first` (= the offset) for `bytes`
// bytes, (1 + sum_i (shape_i - 1) * stride_i) * element_size; 0 bytes for an empty tensor.
struct ByteSpan {
  int64_t first = 0;
  int64_t bytes = 0;
};

// The span of a tensor of `shape` stored at `where`; nullopt when strides and shape differ in
// rank, a stride or dimension or the offset is negative, or the span overflows 63 bits.
std::optional<ByteSpan> element_span(const std::vector<int64_t>& shape, const TensorLocation& where,
                                     size_t element_size);

// Elements of `shape` at `where` gathered from `span` (the bytes of element_span, starting at
// its first byte) into a row-major tensor of `dtype`; big-endian elements are byte-swapped and
// bool elements become 0 / 1 (uint8 ones are kept: a mask's are checked by mask_values.h).
HostTensor gather_tensor(DType dtype, const std::vector<int64_t>& shape,
                         const TensorLocation& where, const uint8_t* span);

}  // namespace attnscope
