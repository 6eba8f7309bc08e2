// LibTorch SDPA forward + backward of one layer, timed and turned into a case (torch_layer.h).
#include "core/torch_layer.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace attnscope {
namespace {

// The tensor's bf16 bits as a HostTensor of the same shape (contiguous copy).
HostTensor host_bf16(const at::Tensor& t) {
  const at::Tensor c = t.detach().to(at::kBFloat16).contiguous();
  HostTensor h;
  h.dtype = DType::bf16;
  h.shape.assign(c.sizes().begin(), c.sizes().end());
  h.bytes.resize(static_cast<size_t>(c.numel()) * 2);
  std::memcpy(h.bytes.data(), c.data_ptr(), h.bytes.size());
  return h;
}

// The SDPA backend the dispatcher picks for these arguments, by the recorder's names.
const char* backend_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t choice =
      at::_fused_sdp_choice(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt, true);
  switch (choice) {
    case 0:
      return "sdpa_math";
    case 1:
      return "sdpa_flash";
    case 2:
      return "sdpa_efficient";
    case 3:
      return "sdpa_cudnn";
  }
  return "sdpa_unknown";
}

}  // namespace

Result<RecordedLayer> record_torch_layer(const LayerShape& s, int threads, int reps) {
  if (s.batch < 1 || s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0 || s.seqlen < 1 ||
      s.head_dim < 1 || reps < 1) {
    return make_error(ErrorCode::invalid_argument, "record_torch_layer: bad shape or reps",
                      "heads must be a multiple of kv_heads; every size >= 1");
  }
  if (threads > 0) at::set_num_threads(threads);
  at::manual_seed(20261206);
  const auto bf16 = at::TensorOptions().dtype(at::kBFloat16);
  const at::Tensor q0 = at::randn({s.batch, s.heads, s.seqlen, s.head_dim}, bf16);
  const at::Tensor k0 = at::randn({s.batch, s.kv_heads, s.seqlen, s.head_dim}, bf16);
  const at::Tensor v0 = at::randn({s.batch, s.kv_heads, s.seqlen, s.head_dim}, bf16);
  const at::Tensor dout = at::randn({s.batch, s.heads, s.seqlen, s.head_dim}, bf16);
  at::Tensor q, k, v, o;
  std::vector<double> seconds;
  for (int r = 0; r <= reps; ++r) {  // run 0 warms up, untimed
    q = q0.detach().requires_grad_(true);
    k = k0.detach().requires_grad_(true);
    v = v0.detach().requires_grad_(true);
    const auto start = std::chrono::steady_clock::now();
    o = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt,
                                         /*enable_gqa=*/true);
    o.backward(dout);
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) seconds.push_back(t);
  }
  RecordedLayer out;
  std::sort(seconds.begin(), seconds.end());
  out.step_seconds = seconds[seconds.size() / 2];
  out.step_min_seconds = seconds.front();
  CaseData& c = out.data;
  c.info.path = "/step_000000/layer_00";
  c.info.config.step = 0;
  c.info.config.layer = 0;
  c.info.config.causal = true;
  c.info.config.dtype = "bfloat16";
  c.info.config.name = "scaled_dot_product_attention";
  c.info.config.run.backend = backend_of(q0, k0, v0);
  c.info.config.run.torch_version = TORCH_VERSION;
  c.info.config.run.device = "cpu";
  c.info.config.run.micro_batch = 0;
  c.tensors["q"] = host_bf16(q0);
  c.tensors["k"] = host_bf16(k0);
  c.tensors["v"] = host_bf16(v0);
  c.tensors["do"] = host_bf16(dout);
  c.tensors["o"] = host_bf16(o);
  c.tensors["dq"] = host_bf16(q.grad());
  c.tensors["dk"] = host_bf16(k.grad());
  c.tensors["dv"] = host_bf16(v.grad());
  for (const char* name : kTensorNames) {
    if (const HostTensor* t = c.find(name))
      c.info.tensors.push_back({name, name, t->dtype, t->shape});
  }
  Result<CaseDims> dims = infer_case_dims(c.info.tensors, Layout::bhsd, c.info.path);
  if (!dims) return dims.error();
  c.info.dims = *dims;
  return out;
}

}  // namespace attnscope
