// Cutting one (batch, head) out of a case (see head_slice.h).
#include "core/view/head_slice.h"

namespace attnscope {
namespace {

std::vector<double> slice64(const HostTensor& x, int64_t offset, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  x.read_double(offset, n, out.data());
  return out;
}

std::vector<float> to_f32(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

}  // namespace

HeadSlice slice_head(const CaseData& data, const CaseInputs& in, int64_t b, int64_t h) {
  const AttnParams& p = in.params;
  HeadSlice s;
  s.params = p;
  s.params.batch = s.params.heads = s.params.kv_heads = 1;
  const int64_t kvh = p.kv_head_of(h);
  const int64_t q_head = (b * p.heads + h) * p.seqlen_q;
  const int64_t k_head = (b * p.kv_heads + kvh) * p.seqlen_k;
  s.q64 = slice64(data.q(), q_head * p.head_dim, p.seqlen_q * p.head_dim);
  s.k64 = slice64(data.k(), k_head * p.head_dim, p.seqlen_k * p.head_dim);
  s.v64 = slice64(data.v(), k_head * p.head_dim_v, p.seqlen_k * p.head_dim_v);
  if (const HostTensor* dout = data.find("do")) {
    s.dout64 = slice64(*dout, q_head * p.head_dim_v, p.seqlen_q * p.head_dim_v);
  }
  s.q = to_f32(s.q64);
  s.k = to_f32(s.k64);
  s.v = to_f32(s.v64);
  s.dout = to_f32(s.dout64);
  if (p.mask != nullptr) s.params.mask = p.mask + b * p.mask_strides.b + h * p.mask_strides.h;
  if (p.bias != nullptr) s.params.bias = p.bias + b * p.bias_strides.b + h * p.bias_strides.h;
  return s;
}

}  // namespace attnscope
