// Byte spans and the strided gather of tensors stored at a TensorLocation.
#include "core/io/tensor_location.h"

#include <algorithm>
#include <cstring>

namespace attnscope {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

std::optional<ByteSpan> element_span(const std::vector<int64_t>& shape, const TensorLocation& where,
                                     size_t element_size) {
  if (where.strides.size() != shape.size() || where.offset < 0) return std::nullopt;
  int64_t last = 0;  // element index of the last element, relative to the first
  bool empty = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t size = shape[i], stride = where.strides[i];
    if (size < 0 || stride < 0) return std::nullopt;
    empty = empty || size == 0;
    int64_t reach = 0;
    if (size > 0 && (__builtin_mul_overflow(size - 1, stride, &reach) ||
                     __builtin_add_overflow(last, reach, &last))) {
      return std::nullopt;
    }
  }
  int64_t bytes = 0, end = 0;
  if (empty) return ByteSpan{where.offset, 0};
  if (__builtin_add_overflow(last, 1, &last) ||
      __builtin_mul_overflow(last, static_cast<int64_t>(element_size), &bytes) ||
      __builtin_add_overflow(where.offset, bytes, &end)) {
    return std::nullopt;
  }
  return ByteSpan{where.offset, bytes};
}

namespace {

// Reverses the bytes of each `size`-byte element of `data`.
void swap_bytes(uint8_t* data, size_t count, size_t size) {
  for (size_t i = 0; i < count; ++i) std::reverse(data + i * size, data + (i + 1) * size);
}

}  // namespace

HostTensor gather_tensor(DType dtype, const std::vector<int64_t>& shape,
                         const TensorLocation& where, const uint8_t* span) {
  HostTensor out;
  out.dtype = dtype;
  out.shape = shape;
  const size_t size = dtype_size(dtype);
  const size_t n = static_cast<size_t>(out.numel());
  out.bytes.resize(n * size);
  if (n == 0) return out;
  const size_t rank = shape.size();
  if (where.strides == contiguous_strides(shape)) {
    std::memcpy(out.bytes.data(), span, n * size);
  } else if (rank == 0) {
    std::memcpy(out.bytes.data(), span, size);
  } else {
    // Rows of the innermost dimension, one at a time; `index` counts the outer dimensions.
    std::vector<int64_t> index(rank, 0);
    const int64_t cols = shape[rank - 1], col_stride = where.strides[rank - 1];
    uint8_t* dst = out.bytes.data();
    for (size_t row = 0; row < n / static_cast<size_t>(cols); ++row) {
      int64_t base = 0;
      for (size_t d = 0; d + 1 < rank; ++d) base += index[d] * where.strides[d];
      if (col_stride == 1) {
        std::memcpy(dst, span + base * static_cast<int64_t>(size),
                    static_cast<size_t>(cols) * size);
        dst += static_cast<size_t>(cols) * size;
      } else {
        for (int64_t c = 0; c < cols; ++c, dst += size) {
          std::memcpy(dst, span + (base + c * col_stride) * static_cast<int64_t>(size), size);
        }
      }
      for (size_t d = rank - 1; d-- > 0;) {
        if (++index[d] < shape[d]) break;
        index[d] = 0;
      }
    }
  }
  if (where.big_endian && size > 1) swap_bytes(out.bytes.data(), n, size);
  if (dtype == DType::boolean) {
    for (uint8_t& b : out.bytes) b = b != 0 ? 1 : 0;
  }
  return out;
}

}  // namespace attnscope
