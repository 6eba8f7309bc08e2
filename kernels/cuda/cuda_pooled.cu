// Pooled S and P of one (batch, head) on the GPU (DESIGN §5 "Large sequences"): one CTA per
// 64 x 64 tile of the window recomputes S with the forward's stages (score, softcap, bias,
// mask) and P = exp(S - m) / l from the forward's m, l, and adds every entry to its pooled cell
// with atomics: NaN / masked / +inf / -inf / finite counts, max, min and an fp64 sum.
#include "kernels/cuda/cuda_kernels.cuh"

namespace attnscope::cuda {
namespace {

// Adds one entry to cell `cell` of a pooled matrix (NaN first, then masked, then +-inf).
__device__ void pool_entry(const PoolCells& m, int64_t cell, float x, bool masked) {
  if (is_nan(x)) {
    atomicAdd(m.nan + cell, 1);
  } else if (masked) {
    atomicAdd(m.masked + cell, 1);
  } else if (!is_finite(x)) {
    atomicAdd(x > 0 ? m.pos_inf + cell : m.neg_inf + cell, 1);
  } else {
    atomicAdd(m.finite + cell, 1);
    atomicMax(m.max + cell, ordered_int(x));
    atomicMin(m.min + cell, ordered_int(x));
    atomicAdd(m.sum + cell, static_cast<double>(x));
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    pooled_kernel(Args<T> a, PoolWindow w, PoolCells s_cells, PoolCells p_cells) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int ld = ld_t(a.dim_pad);
  T* q = reinterpret_cast<T*>(smem);
  T* k = reinterpret_cast<T*>(smem + align128(int64_t{kTileRows} * ld * sizeof(T)));
  float* s = reinterpret_cast<float*>(smem + 2 * align128(int64_t{kTileRows} * ld * sizeof(T)));
  const int64_t i0 = (w.row_begin / kTileRows + blockIdx.y) * int64_t{kTileRows};
  const int64_t j0 = (w.col_begin / kTileCols + blockIdx.x) * int64_t{kTileCols};
  const int64_t bh = w.b * a.heads + w.h, bkv = w.b * a.kv_heads + w.h / a.group;
  load_tile(a.q + bh * a.sq * a.dim, a.sq, a.dim, i0, a.dim_pad, q, ld);
  load_tile(a.k + bkv * a.sk * a.dim, a.sk, a.dim, j0, a.dim_pad, k, ld);
  __syncthreads();
  block_matmul<T, false, true>(kTileRows, kTileCols, a.dim_pad, q, ld, k, ld, s, ld_f(kTileCols),
                               false);
  __syncthreads();
  for (int e = threadIdx.x; e < kTileRows * kTileCols; e += blockDim.x) {
    const int64_t i = i0 + e / kTileCols, j = j0 + e % kTileCols;
    if (i < w.row_begin || i >= w.row_end || j < w.col_begin || j >= w.col_end) continue;
    const float scaled = s[(e / kTileCols) * ld_f(kTileCols) + e % kTileCols] * a.scale;
    float gf;
    float v =
        apply_softcap(scaled, a.softcap, a.softcap > 0 ? tanhf(scaled / a.softcap) : 0.0f, &gf);
    const float bias = a.bias != nullptr ? a.bias[broadcast_offset(a.bias_st, w.b, w.h, i, j)] : 0;
    v += bias;
    bool hidden = a.causal && j > i + a.shift;
    if (a.mask != nullptr) hidden |= a.mask[broadcast_offset(a.mask_st, w.b, w.h, i, j)] == 0;
    if (hidden) v = a.fill;
    const bool masked = hidden || bias == -pos_inf();
    const int64_t cell = pooled_cell(i - w.row_begin, w.row_end - w.row_begin, w.rows) * w.cols +
                         pooled_cell(j - w.col_begin, w.col_end - w.col_begin, w.cols);
    if (s_cells.finite != nullptr) pool_entry(s_cells, cell, v, masked);
    if (p_cells.finite != nullptr) {
      const float m = a.m[bh * a.sq + i], l = a.l[bh * a.sq + i];
      const float p = a.safe && m == -pos_inf() ? 0.0f : expf(v - m) * (1.0f / l);
      pool_entry(p_cells, cell, p, masked);
    }
  }
}

}  // namespace

template <typename T>
void launch_pooled(const Args<T>& a, const PoolWindow& w, const PoolCells& s_cells,
                   const PoolCells& p_cells, cudaStream_t stream) {
  const int64_t tile_bytes = align128(int64_t{kTileRows} * ld_t(a.dim_pad) * sizeof(T));
  const int bytes = static_cast<int>(2 * tile_bytes + int64_t{kTileRows} * ld_f(kTileCols) * 4);
  check_cuda(
      cudaFuncSetAttribute(pooled_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
      "cudaFuncSetAttribute(pooled_kernel)");
  const int64_t q_first = w.row_begin / kTileRows, q_last = (w.row_end - 1) / kTileRows;
  const int64_t k_first = w.col_begin / kTileCols, k_last = (w.col_end - 1) / kTileCols;
  const dim3 grid(static_cast<unsigned>(k_last - k_first + 1),
                  static_cast<unsigned>(q_last - q_first + 1));
  pooled_kernel<T><<<grid, kThreads, bytes, stream>>>(a, w, s_cells, p_cells);
  check_cuda(cudaGetLastError(), "pooled_kernel launch");
}

template void launch_pooled<float>(const Args<float>&, const PoolWindow&, const PoolCells&,
                                   const PoolCells&, cudaStream_t);
template void launch_pooled<__half>(const Args<__half>&, const PoolWindow&, const PoolCells&,
                                    const PoolCells&, cudaStream_t);
template void launch_pooled<__nv_bfloat16>(const Args<__nv_bfloat16>&, const PoolWindow&,
                                           const PoolCells&, const PoolCells&, cudaStream_t);

}  // namespace attnscope::cuda
