// HostTensor element access and dtype conversions.
#include "host_tensor.h"

#include <cstring>
#include <sstream>

#include "kernels/precision.h"

namespace attnscope {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f16:
      return "float16";
    case DType::bf16:
      return "bfloat16";
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::u8:
      return "uint8";
    case DType::boolean:
      return "bool";
    case DType::i32:
      return "int32";
    case DType::i64:
      return "int64";
  }
  return "unknown";
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f64:
    case DType::i64:
      return 8;
    case DType::u8:
    case DType::boolean:
      return 1;
  }
  return 1;
}

bool dtype_is_float(DType t) {
  return t == DType::f16 || t == DType::bf16 || t == DType::f32 || t == DType::f64;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string HostTensor::shape_string() const {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ']';
  return out.str();
}

double HostTensor::at(int64_t i) const {
  const uint8_t* p = bytes.data() + static_cast<size_t>(i) * dtype_size(dtype);
  switch (dtype) {
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return half_bits_to_float(h);
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return bf16_bits_to_float(h);
    }
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::f64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::u8:
    case DType::boolean:
      return *p;
    case DType::i32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::i64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
  }
  return 0;
}

std::vector<double> HostTensor::to_double() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  read_double(0, numel(), out.data());
  return out;
}

namespace {

// n stored values of type Stored from p, converted by `widen`: one dtype dispatch per range.
template <typename Stored, typename Out, typename Widen>
void widen_range(const uint8_t* p, int64_t n, Out* out, Widen widen) {
  for (int64_t i = 0; i < n; ++i) {
    Stored x;
    std::memcpy(&x, p + static_cast<size_t>(i) * sizeof(Stored), sizeof(Stored));
    out[i] = static_cast<Out>(widen(x));
  }
}

// Elements [first, first + n) of t into out, as fp64 or fp32 (rounded from the fp64 value).
template <typename Out>
void read_range(const HostTensor& t, int64_t first, int64_t n, Out* out) {
  const uint8_t* p = t.bytes.data() + static_cast<size_t>(first) * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::f16:
      return widen_range<uint16_t>(p, n, out, [](uint16_t h) { return half_bits_to_float(h); });
    case DType::bf16:
      return widen_range<uint16_t>(p, n, out, [](uint16_t h) { return bf16_bits_to_float(h); });
    case DType::f32:
      return widen_range<float>(p, n, out, [](float x) { return x; });
    case DType::f64:
      return widen_range<double>(p, n, out, [](double x) { return x; });
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Out>(t.at(first + i));
  }
}

}  // namespace

void HostTensor::read_double(int64_t first, int64_t n, double* out) const {
  read_range(*this, first, n, out);
}

void HostTensor::read_float(int64_t first, int64_t n, float* out) const {
  read_range(*this, first, n, out);
}

std::vector<float> HostTensor::to_float() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  read_float(0, numel(), out.data());
  return out;
}

std::vector<uint8_t> HostTensor::to_mask() const {
  std::vector<uint8_t> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = at(static_cast<int64_t>(i)) != 0 ? 1 : 0;
  return out;
}

namespace {

template <typename Source>
HostTensor convert(DType dtype, std::vector<int64_t> shape, const std::vector<Source>& values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.resize(values.size() * dtype_size(dtype));
  uint8_t* out = t.bytes.data();
  for (size_t i = 0; i < values.size(); ++i) {
    const double x = static_cast<double>(values[i]);
    switch (dtype) {
      case DType::f16: {
        const uint16_t h = float_to_half_bits(static_cast<float>(x));
        std::memcpy(out + 2 * i, &h, 2);
        break;
      }
      case DType::bf16: {
        const uint16_t h = float_to_bf16_bits(static_cast<float>(x));
        std::memcpy(out + 2 * i, &h, 2);
        break;
      }
      case DType::f32: {
        const float f = static_cast<float>(x);
        std::memcpy(out + 4 * i, &f, 4);
        break;
      }
      case DType::f64:
        std::memcpy(out + 8 * i, &x, 8);
        break;
      case DType::u8:
      case DType::boolean:
        out[i] = x != 0 ? 1 : 0;
        break;
      case DType::i32: {
        const auto v = static_cast<int32_t>(x);
        std::memcpy(out + 4 * i, &v, 4);
        break;
      }
      case DType::i64: {
        const auto v = static_cast<int64_t>(x);
        std::memcpy(out + 8 * i, &v, 8);
        break;
      }
    }
  }
  return t;
}

}  // namespace

HostTensor HostTensor::from_double(DType dtype, std::vector<int64_t> shape,
                                   const std::vector<double>& values) {
  return convert(dtype, std::move(shape), values);
}

HostTensor HostTensor::from_float(DType dtype, std::vector<int64_t> shape,
                                  const std::vector<float>& values) {
  return convert(dtype, std::move(shape), values);
}

}  // namespace attnscope
