// HostTensor: a dense row-major tensor in host memory that keeps the element type it was
// recorded in (the original values are exact in it), with conversions to fp32 / fp64.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnscope {

// i32 / i64 hold only index tensors (cu_seqlens of packed sequences).
enum class DType : uint8_t { f16, bf16, f32, f64, u8, boolean, i32, i64 };

// "float16", "bfloat16", "float32", "float64", "uint8", "bool", "int32", "int64"
const char* dtype_name(DType t);
size_t dtype_size(DType t);
bool dtype_is_float(DType t);

struct HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // numel() * dtype_size(dtype) bytes, row-major

  int64_t numel() const;
  std::string shape_string() const;  // "[2, 8, 1024, 64]"

  double at(int64_t flat_index) const;  // element as fp64 (exact; int64 up to 2^53)
  std::vector<double> to_double() const;
  // Elements [first, first + n) as fp64 into out[0, n) (a slice without a whole-tensor copy).
  void read_double(int64_t first, int64_t n, double* out) const;
  // The same as fp32 (each fp64 value rounded to nearest; exact for f16, bf16, f32).
  void read_float(int64_t first, int64_t n, float* out) const;
  std::vector<float> to_float() const;
  std::vector<uint8_t> to_mask() const;  // nonzero -> 1

  // Rounds each value to `dtype` (round-to-nearest-even, overflow to +-inf).
  static HostTensor from_double(DType dtype, std::vector<int64_t> shape,
                                const std::vector<double>& values);
  static HostTensor from_float(DType dtype, std::vector<int64_t> shape,
                               const std::vector<float>& values);
};

}  // namespace attnscope
