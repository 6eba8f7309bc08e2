// The host side of the CUDA attention (cuda_attention.h): device queries, the support check,
// and CudaAttention, which owns the device buffers, uploads the inputs rounded to the
// precision, launches the stages and downloads outputs and instrumentation.
#include "kernels/cuda/cuda_attention.h"

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_kernels.cuh"

namespace attnscope::cuda {

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA error in ") + what + ": " +
                             cudaGetErrorString(status));
  }
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device / no driver" status
    return 0;
  }
  return n;
}

std::string device_description() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(status);
  }
  if (n == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major * 10 + prop.minor) + ", " +
         std::to_string(prop.multiProcessorCount) + " SMs)";
}

void device_synchronize() {
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

namespace {

int element_size(Precision p) {
  return p == Precision::f16 || p == Precision::bf16 ? 2 : 4;
}

// Opt-in shared memory per block of device 0; sm_90's 227 KB without a device.
int64_t shared_limit() {
  if (device_count() == 0) return 232448;
  int bytes = 0;
  check_cuda(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0),
             "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
  return bytes;
}

}  // namespace

int64_t forward_shared_bytes(const AttnParams& p) {
  return ForwardLayout(pad16(p.head_dim), pad16(p.head_dim_v), element_size(p.precision)).total;
}

int64_t backward_shared_bytes(const AttnParams& p) {
  return BackwardLayout(pad16(p.head_dim), pad16(p.head_dim_v), element_size(p.precision)).total;
}

std::string unsupported_reason(const AttnParams& p) {
  if (p.precision == Precision::f64) return "the CUDA kernels run f32, f16 and bf16, not f64";
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seqlen_q < 1 || p.seqlen_k < 1 ||
      p.head_dim < 1 || p.head_dim_v < 1 || p.heads % p.kv_heads != 0) {
    return "invalid sizes (every size >= 1, kv_heads dividing heads)";
  }
  if (p.batch * p.heads > 65535 || p.batch * p.kv_heads > 65535) {
    return "batch * heads above 65535 (the kernels' grid y dimension)";
  }
  const int64_t need = std::max(forward_shared_bytes(p), backward_shared_bytes(p));
  const int64_t limit = shared_limit();
  if (need > limit) {
    return "head_dim " + std::to_string(p.head_dim) + " / head_dim_v " +
           std::to_string(p.head_dim_v) + " at " +
           (element_size(p.precision) == 2 ? "16-bit" : "fp32") + " needs " +
           std::to_string(need / 1024) + " KB of shared memory per block, the device allows " +
           std::to_string(limit / 1024) + " KB";
  }
  return "";
}

std::vector<CudaStepTile> backward_tile_sequence(const AttnParams& p,
                                                 const std::vector<uint8_t>& kv_clean,
                                                 const std::vector<uint8_t>& q_clean) {
  const int64_t n_q = (p.seqlen_q + kTileRows - 1) / kTileRows;
  const int64_t n_kv = (p.seqlen_k + kTileCols - 1) / kTileCols;
  const bool bottom_right = p.causal_align == CausalAlign::bottom_right;
  const int64_t shift = causal_shift(bottom_right, p.seqlen_q, p.seqlen_k);
  const bool neg_inf_fill = p.mask_fill == MaskFill::neg_inf || p.mask_fill == MaskFill::safe;
  std::vector<CudaStepTile> out;
  for (int64_t jt = 0; jt < n_kv; ++jt) {
    for (int64_t qt = 0; qt < n_q; ++qt) {
      const int64_t i0 = qt * kTileRows, rows = std::min<int64_t>(kTileRows, p.seqlen_q - i0);
      const bool kv_ok = kv_clean.empty() || kv_clean[static_cast<size_t>(jt)] != 0;
      const bool q_ok = q_clean.empty() || q_clean[static_cast<size_t>(qt)] != 0;
      const bool hidden = tile_causally_hidden(p.causal, shift, i0, rows, jt * kTileCols);
      out.push_back({jt, qt, hidden && neg_inf_fill && kv_ok && q_ok});
    }
  }
  return out;
}

}  // namespace attnscope::cuda
