// Small kernels around the CUDA attention: finite kv tiles (for tile skipping) and the
// instrumentation that runs after a traced forward / backward: per-row sums of squares (the
// gradient norms) and provenance counts of the non-finite outputs (device_math.h's
// row_provenance, the rule the CPU recorder applies per element).
#include "kernels/cuda/cuda_kernels.cuh"

namespace attnscope::cuda {
namespace {

constexpr int kCodes = 9;  // Provenance codes

// One CTA per (kv tile, batch x kv head): 1 when every K and V entry of the tile is finite.
template <typename T>
__global__ void kv_clean_kernel(Args<T> a, uint8_t* kv_clean) {
  const int64_t bkv = blockIdx.y, j0 = int64_t{blockIdx.x} * kTileCols;
  const int64_t cols = tile_extent(a.sk, j0, kTileCols);
  bool ok = true;
  const T* k = a.k + (bkv * a.sk + j0) * a.dim;
  const T* v = a.v + (bkv * a.sk + j0) * a.dim_v;
  for (int64_t e = threadIdx.x; e < cols * a.dim; e += blockDim.x) ok &= is_finite(load_f(k[e]));
  for (int64_t e = threadIdx.x; e < cols * a.dim_v; e += blockDim.x) ok &= is_finite(load_f(v[e]));
  ok = __syncthreads_and(ok) != 0;
  if (threadIdx.x == 0) kv_clean[bkv * a.n_kv + blockIdx.x] = ok ? 1 : 0;
}

template <typename T>
__global__ void row_squares_kernel(const T* x, int64_t rows, int64_t dim, double* sq) {
  const int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (row >= rows) return;
  double sum = 0;
  for (int64_t c = 0; c < dim; ++c) {
    const double v = load_f(x[row * dim + c]);
    sum += v * v;
  }
  sq[row] = sum;
}

// True when some K or V tile of the kv head of query row `row` is non-finite.
template <typename T>
__device__ bool kv_head_bad(const Args<T>& a, int64_t row) {
  const int64_t bh = row / a.sq, bkv = (bh / a.heads) * a.kv_heads + (bh % a.heads) / a.group;
  for (int jt = 0; jt < a.n_kv; ++jt) {
    if (a.kv_clean[bkv * a.n_kv + jt] == 0) return true;
  }
  return false;
}

template <typename T>
__device__ bool row_finite(const T* x, int64_t row, int64_t dim) {
  for (int64_t c = 0; c < dim; ++c) {
    if (!is_finite(load_f(x[row * dim + c]))) return false;
  }
  return true;
}

template <typename T>
__device__ int row_nonfinite(const T* x, int64_t row, int64_t dim) {
  int n = 0;
  for (int64_t c = 0; c < dim; ++c) n += is_finite(load_f(x[row * dim + c])) ? 0 : 1;
  return n;
}

// counts[0:9] of O (fallback propagated) and LSE (fallback lse), one thread per query row.
template <typename T>
__global__ void forward_provenance_kernel(Args<T> a, unsigned long long* counts) {
  const int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (row >= a.batch * a.heads * a.sq) return;
  const int n_o = row_nonfinite(a.o, row, a.dim_v);
  const bool lse_bad = !is_finite(a.lse[row]);
  if (n_o == 0 && !lse_bad) return;
  const bool bad = kv_head_bad(a, row);
  const uint32_t causes = a.row_causes[row];
  if (n_o > 0) {
    const Provenance c =
        row_provenance(causes, bad, a.m[row] == -pos_inf(), Provenance::propagated);
    atomicAdd(counts + static_cast<int>(c), static_cast<unsigned long long>(n_o));
  }
  if (lse_bad) {
    const Provenance c = row_provenance(causes, bad, a.m[row] == -pos_inf(), Provenance::lse);
    atomicAdd(counts + static_cast<int>(c), 1ull);
  }
}

// poisoned[bkv] |= 1 when a query row of the kv group carries a cause, an empty non-safe row
// or a non-finite q / dO row.
template <typename T>
__global__ void poisoned_groups_kernel(Args<T> a, uint32_t* poisoned) {
  const int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (row >= a.batch * a.heads * a.sq) return;
  const bool empty = a.m[row] == -pos_inf() && !a.safe;
  if (a.row_causes[row] != 0 || empty || !row_finite(a.q, row, a.dim) ||
      !row_finite(a.dout, row, a.dim_v)) {
    const int64_t bh = row / a.sq;
    atomicOr(poisoned + (bh / a.heads) * a.kv_heads + (bh % a.heads) / a.group, 1u);
  }
}

// dQ rows (one thread per query row), then dK and dV rows (one per key row).
template <typename T>
__global__ void backward_provenance_kernel(Args<T> a, unsigned long long* counts,
                                           const uint32_t* poisoned) {
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t q_rows = a.batch * a.heads * a.sq, kv_rows = a.batch * a.kv_heads * a.sk;
  if (idx < q_rows) {
    const int n = row_nonfinite(a.dq, idx, a.dim);
    if (n == 0) return;
    const bool bad = kv_head_bad(a, idx) || !row_finite(a.dout, idx, a.dim_v);
    const Provenance c =
        row_provenance(a.row_causes[idx], bad, a.m[idx] == -pos_inf(), Provenance::grad_overflow);
    atomicAdd(counts + static_cast<int>(c), static_cast<unsigned long long>(n));
  } else if (idx < q_rows + kv_rows) {
    const int64_t row = idx - q_rows;
    const int n = row_nonfinite(a.dk, row, a.dim) + row_nonfinite(a.dv, row, a.dim_v);
    if (n == 0) return;
    const bool own = !row_finite(a.k, row, a.dim) || !row_finite(a.v, row, a.dim_v);
    const Provenance c = own                         ? Provenance::input
                         : poisoned[row / a.sk] != 0 ? Provenance::propagated
                                                     : Provenance::grad_overflow;
    atomicAdd(counts + static_cast<int>(c), static_cast<unsigned long long>(n));
  }
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>((n + kThreads - 1) / kThreads);
}

}  // namespace

template <typename T>
void launch_kv_clean(const Args<T>& a, uint8_t* kv_clean, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.n_kv), static_cast<unsigned>(a.batch * a.kv_heads));
  kv_clean_kernel<T><<<grid, kThreads, 0, stream>>>(a, kv_clean);
  check_cuda(cudaGetLastError(), "kv_clean_kernel launch");
}

template <typename T>
void launch_row_squares(const T* x, int64_t rows, int64_t dim, double* sq, cudaStream_t stream) {
  row_squares_kernel<T><<<blocks_for(rows), kThreads, 0, stream>>>(x, rows, dim, sq);
  check_cuda(cudaGetLastError(), "row_squares_kernel launch");
}

template <typename T>
void launch_forward_provenance(const Args<T>& a, unsigned long long* counts, cudaStream_t stream) {
  check_cuda(cudaMemsetAsync(counts, 0, kCodes * sizeof(unsigned long long), stream),
             "cudaMemsetAsync(provenance counts)");
  forward_provenance_kernel<T>
      <<<blocks_for(a.batch * a.heads * a.sq), kThreads, 0, stream>>>(a, counts);
  check_cuda(cudaGetLastError(), "forward_provenance_kernel launch");
}

template <typename T>
void launch_backward_provenance(const Args<T>& a, unsigned long long* counts, uint32_t* poisoned,
                                cudaStream_t stream) {
  check_cuda(cudaMemsetAsync(counts, 0, kCodes * sizeof(unsigned long long), stream),
             "cudaMemsetAsync(provenance counts)");
  check_cuda(cudaMemsetAsync(poisoned, 0, sizeof(uint32_t) * a.batch * a.kv_heads, stream),
             "cudaMemsetAsync(poisoned)");
  const int64_t q_rows = a.batch * a.heads * a.sq, kv_rows = a.batch * a.kv_heads * a.sk;
  poisoned_groups_kernel<T><<<blocks_for(q_rows), kThreads, 0, stream>>>(a, poisoned);
  check_cuda(cudaGetLastError(), "poisoned_groups_kernel launch");
  backward_provenance_kernel<T>
      <<<blocks_for(q_rows + kv_rows), kThreads, 0, stream>>>(a, counts, poisoned);
  check_cuda(cudaGetLastError(), "backward_provenance_kernel launch");
}

#define ATTNSCOPE_TRACE_INSTANTIATE(T)                                                           \
  template void launch_kv_clean<T>(const Args<T>&, uint8_t*, cudaStream_t);                      \
  template void launch_row_squares<T>(const T*, int64_t, int64_t, double*, cudaStream_t);        \
  template void launch_forward_provenance<T>(const Args<T>&, unsigned long long*, cudaStream_t); \
  template void launch_backward_provenance<T>(const Args<T>&, unsigned long long*, uint32_t*,    \
                                              cudaStream_t);
ATTNSCOPE_TRACE_INSTANTIATE(float)
ATTNSCOPE_TRACE_INSTANTIATE(__half)
ATTNSCOPE_TRACE_INSTANTIATE(__nv_bfloat16)
#undef ATTNSCOPE_TRACE_INSTANTIATE

}  // namespace attnscope::cuda
