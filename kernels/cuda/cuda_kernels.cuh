// Internal to kernels/cuda: the kernel launchers of cuda_forward.cu / cuda_backward.cu /
// cuda_trace.cu, called by the session in cuda_attention.cu. All launches go on `stream` and
// return without waiting; launch errors throw std::runtime_error.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_common.cuh"

namespace attnscope::cuda {

// kv_clean [B * Hk * n_kv] = 1 where the K and V rows of the kv tile are all finite.
template <typename T>
void launch_kv_clean(const Args<T>& a, uint8_t* kv_clean, cudaStream_t stream);

// The forward: o, lse, m, l (and fwd_tiles, row_causes when set).
template <typename T>
void launch_forward(const Args<T>& a, cudaStream_t stream);

// backward_preprocess: d = rowsum(dO * O), q_clean flags, dq_acc zeroed.
template <typename T>
void launch_backward_preprocess(const Args<T>& a, cudaStream_t stream);

// The backward main loop (dk, dv stored; dq_acc accumulated) and its postprocess (dq stored).
template <typename T>
void launch_backward(const Args<T>& a, cudaStream_t stream);

// Instrumentation after a traced run: sums of squares per row of x [rows x dim] into
// sq [rows] (fp64), and provenance counts (9 codes) of the non-finite entries.
template <typename T>
void launch_row_squares(const T* x, int64_t rows, int64_t dim, double* sq, cudaStream_t stream);

// Forward provenance: per O / LSE row of query head bh, row_provenance with inputs_bad = the kv
// head has a non-finite K or V tile, fallback propagated (O) / lse (LSE).
template <typename T>
void launch_forward_provenance(const Args<T>& a, unsigned long long* counts, cudaStream_t stream);

// Backward provenance: dQ rows as the forward's rows (plus a non-finite dO row, fallback
// grad_overflow); dK / dV rows: input when their own K / V row is non-finite, else propagated
// when some query row of their kv group carries a cause, an empty row or a non-finite q / dO
// row (poisoned [B * Hk] scratch), else grad_overflow.
template <typename T>
void launch_backward_provenance(const Args<T>& a, unsigned long long* counts, uint32_t* poisoned,
                                cudaStream_t stream);

// Device accumulators of one pooled matrix, n cells each (all null: not selected). max / min
// hold ordered_int values (initialised to ordered_int(-inf) / ordered_int(+inf)).
struct PoolCells {
  int *max, *min, *finite, *nan, *pos_inf, *neg_inf, *masked;
  double* sum;
};

// The pooled window of query head (b, h): rows [row_begin, row_end) x keys [col_begin,
// col_end) in rows x cols cells (cuda_pooled.cu).
struct PoolWindow {
  int64_t b, h, row_begin, row_end, col_begin, col_end, rows, cols;
};

// Pools S (s_cells) and P = exp(S - m) / l (p_cells, needs the forward's m, l) of the window.
template <typename T>
void launch_pooled(const Args<T>& a, const PoolWindow& w, const PoolCells& s_cells,
                   const PoolCells& p_cells, cudaStream_t stream);

}  // namespace attnscope::cuda
