// The CUDA FlashAttention-2 forward: one CTA of 128 threads per (q tile of 64 rows, batch x
// query head), walking the kv tiles through the stages of the CPU kernel (forward_stages.h):
// score_tile -> mask_tile -> online_softmax_update -> accumulate_pv, then forward_epilogue.
// Tiles live in shared memory (ForwardLayout); matmuls go through block_matmul.
#include "kernels/cuda/cuda_kernels.cuh"

namespace attnscope::cuda {
namespace {

// Shared buffers and coordinates of one CTA.
template <typename T>
struct FwdTile {
  T *q, *k, *v, *p;
  float *s, *acc, *m, *l, *alpha;
  uint32_t* causes;
  uint8_t* cls;
  TileAccum* stats;  // null when not tracing
  int64_t b, h, bh, i0, j0;
  int rows, cols;
};

// S = scale * Q K^T (fp32 accumulation), then softcap, then + bias (rounded when uploaded).
// Entries past the tile's rows / keys are padding (-inf after mask_tile).
template <typename T>
__device__ void score_tile(const Args<T>& a, const FwdTile<T>& t) {
  block_matmul<T, false, true>(kTileRows, kTileCols, a.dim_pad, t.q, ld_t(a.dim_pad), t.k,
                               ld_t(a.dim_pad), t.s, ld_f(kTileCols), false);
  __syncthreads();
  for (int e = threadIdx.x; e < kTileRows * kTileCols; e += blockDim.x) {
    const int r = e / kTileCols, c = e % kTileCols;
    if (r >= t.rows || c >= t.cols) continue;
    float* s = t.s + r * ld_f(kTileCols) + c;
    float gf;
    const float scaled = *s * a.scale;
    float v =
        apply_softcap(scaled, a.softcap, a.softcap > 0 ? tanhf(scaled / a.softcap) : 0.0f, &gf);
    if (a.bias != nullptr) v += a.bias[broadcast_offset(a.bias_st, t.b, t.h, t.i0 + r, t.j0 + c)];
    *s = v;
  }
  __syncthreads();
}

// Masked scores (bool mask 0 or causally hidden) become the fill value; padding -inf. Records
// each entry's class, and with tracing the S statistics and score causes of each row.
template <typename T>
__device__ void mask_tile(const Args<T>& a, const FwdTile<T>& t) {
  for (int e = threadIdx.x; e < kTileRows * kTileCols; e += blockDim.x) {
    const int r = e / kTileCols, c = e % kTileCols;
    float* s = t.s + r * ld_f(kTileCols) + c;
    if (r >= t.rows || c >= t.cols) {
      *s = -pos_inf();
      t.cls[e] = kEntryPadding;
      continue;
    }
    const int64_t i = t.i0 + r, j = t.j0 + c;
    bool hidden = a.causal && j > i + a.shift;
    if (a.mask != nullptr) hidden |= a.mask[broadcast_offset(a.mask_st, t.b, t.h, i, j)] == 0;
    const float bias = a.bias != nullptr ? a.bias[broadcast_offset(a.bias_st, t.b, t.h, i, j)] : 0;
    if (hidden) *s = a.fill;
    t.cls[e] = hidden ? kEntryFillMasked : bias <= kBiasSentinel ? kEntryBiasMasked : kEntryVisible;
    if (t.stats == nullptr) continue;
    if (t.cls[e] != kEntryVisible) {
      atomicAdd(&t.stats->masked, 1);
      continue;
    }
    if (is_finite(*s)) {
      atomicMax(&t.stats->max_abs_s, ordered_int(fabsf(*s)));
      continue;
    }
    count_nonfinite(t.stats->s, *s);
    bool input_bad = !is_finite(bias);
    for (int x = 0; x < a.dim && !input_bad; ++x) {
      input_bad = !is_finite(load_f(t.k[c * ld_t(a.dim_pad) + x])) ||
                  !is_finite(load_f(t.q[r * ld_t(a.dim_pad) + x]));
    }
    const uint32_t cause = input_bad          ? kCauseInput
                           : *s == -pos_inf() ? kCauseScoreNegInf
                                              : kCauseScoreOverflow;
    atomicOr(t.causes + r, cause);
  }
  __syncthreads();
}

// Online softmax over this kv tile, one thread per row (all fp32):
//   m_new = max(m, rowmax S) (NaN-propagating), base = m_new or 0 when -inf,
//   alpha = exp(m - base), P = exp(S - base), l = alpha l + rowsum P, acc *= alpha.
// Invariant after kv tile j: m = max of the scores of keys < (j + 1) Bc, l = sum of
// exp(s - m) over them, acc = sum of exp(s - m) v. P is then stored rounded (the matmul
// operand) in t.p; the fp32 P stays in t.s for the statistics.
template <typename T>
__device__ void online_softmax_update(const Args<T>& a, const FwdTile<T>& t) {
  const int r = threadIdx.x;
  if (r < kTileRows) {
    float* s = t.s + r * ld_f(kTileCols);
    float row_max = -pos_inf();
    for (int c = 0; c < kTileCols; ++c) row_max = max_nan(row_max, s[c]);
    const float m_old = t.m[r], m_new = max_nan(m_old, row_max), base = softmax_base(m_new);
    float sum = 0, max_arg = -pos_inf();
    for (int c = 0; c < kTileCols; ++c) {
      if (t.stats != nullptr && t.cls[r * kTileCols + c] == kEntryVisible && is_finite(s[c])) {
        max_arg = fmaxf(max_arg, s[c] - m_new);
      }
      const float p = expf(s[c] - base);
      s[c] = p;
      sum += p;
      t.p[r * ld_t(kTileCols) + c] = store_f<T>(p);
    }
    t.alpha[r] = expf(m_old - base);
    t.l[r] = t.alpha[r] * t.l[r] + sum;
    t.m[r] = m_new;
    if (t.stats != nullptr && r < t.rows) {
      atomicMax(&t.stats->max_exp_arg, ordered_int(max_arg));
      if (max_arg > kExpOverflowArg) atomicOr(t.causes + r, kCauseExpOverflow);
      for (int c = 0; c < t.cols; ++c) count_nonfinite(t.stats->p, s[c]);
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTileRows * a.dim_v_pad; e += blockDim.x) {
    const int row = e / a.dim_v_pad, c = e % a.dim_v_pad;
    t.acc[row * ld_f(a.dim_v_pad) + c] *= t.alpha[row];
  }
  __syncthreads();
}

// acc += round(P) V with fp32 accumulation.
template <typename T>
__device__ void accumulate_pv(const Args<T>& a, const FwdTile<T>& t) {
  block_matmul<T, false, false>(kTileRows, a.dim_v_pad, kTileCols, t.p, ld_t(kTileCols), t.v,
                                ld_t(a.dim_v_pad), t.acc, ld_f(a.dim_v_pad), true);
  __syncthreads();
  if (t.stats == nullptr) return;
  for (int e = threadIdx.x; e < t.rows * a.dim_v; e += blockDim.x) {
    count_nonfinite(t.stats->acc, t.acc[(e / a.dim_v) * ld_f(a.dim_v_pad) + e % a.dim_v]);
  }
  __syncthreads();
}

// O = round(acc / l), LSE = m + log l; a row with m = -inf gives O = 0, l = 0, LSE = -inf
// under MaskFill::safe and NaN otherwise (exp(-inf - -inf) in the reference).
template <typename T>
__device__ void forward_epilogue(const Args<T>& a, const FwdTile<T>& t) {
  const int64_t row0 = t.bh * a.sq + t.i0;
  for (int e = threadIdx.x; e < t.rows * a.dim_v; e += blockDim.x) {
    const int r = e / a.dim_v, c = e % a.dim_v;
    const float empty = a.safe ? 0.0f : quiet_nan();
    const float o =
        t.m[r] == -pos_inf() ? empty : t.acc[r * ld_f(a.dim_v_pad) + c] * (1.0f / t.l[r]);
    a.o[(row0 + r) * a.dim_v + c] = store_f<T>(o);
  }
  const int r = threadIdx.x;
  if (r < t.rows) {
    const bool empty = t.m[r] == -pos_inf();
    a.m[row0 + r] = t.m[r];
    a.l[row0 + r] = empty ? (a.safe ? 0.0f : quiet_nan()) : t.l[r];
    a.lse[row0 + r] = empty ? (a.safe ? -pos_inf() : quiet_nan()) : t.m[r] + logf(t.l[r]);
    if (a.row_causes != nullptr) a.row_causes[row0 + r] = t.causes[r];
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) forward_kernel(Args<T> a) {
  extern __shared__ __align__(128) unsigned char smem[];
  const ForwardLayout lay(a.dim_pad, a.dim_v_pad, sizeof(T));
  FwdTile<T> t;
  t.q = reinterpret_cast<T*>(smem + lay.q);
  t.k = reinterpret_cast<T*>(smem + lay.k);
  t.v = reinterpret_cast<T*>(smem + lay.v);
  t.p = reinterpret_cast<T*>(smem + lay.p);
  t.s = reinterpret_cast<float*>(smem + lay.s);
  t.acc = reinterpret_cast<float*>(smem + lay.acc);
  t.m = reinterpret_cast<float*>(smem + lay.rows);
  t.l = t.m + kTileRows;
  t.alpha = t.l + kTileRows;
  t.causes = reinterpret_cast<uint32_t*>(t.alpha + kTileRows);
  t.cls = smem + lay.cls;
  t.stats = a.fwd_tiles != nullptr ? reinterpret_cast<TileAccum*>(smem + lay.accum) : nullptr;
  const int qt = blockIdx.x;
  t.bh = blockIdx.y;
  t.b = t.bh / a.heads;
  t.h = t.bh % a.heads;
  t.i0 = int64_t{qt} * kTileRows;
  t.rows = tile_extent(a.sq, t.i0, kTileRows);
  const int64_t bkv = t.b * a.kv_heads + t.h / a.group;

  load_tile(a.q + t.bh * a.sq * a.dim, a.sq, a.dim, t.i0, a.dim_pad, t.q, ld_t(a.dim_pad));
  for (int e = threadIdx.x; e < kTileRows * a.dim_v_pad; e += blockDim.x) {
    t.acc[(e / a.dim_v_pad) * ld_f(a.dim_v_pad) + e % a.dim_v_pad] = 0.0f;
  }
  if (threadIdx.x < kTileRows) {
    t.m[threadIdx.x] = -pos_inf();
    t.l[threadIdx.x] = 0.0f;
    t.causes[threadIdx.x] = 0;
  }
  __syncthreads();
  if (t.stats != nullptr && threadIdx.x < t.rows) {
    for (int x = 0; x < a.dim; ++x) {
      if (!is_finite(load_f(t.q[threadIdx.x * ld_t(a.dim_pad) + x])))
        t.causes[threadIdx.x] |= kCauseInput;
    }
  }
  for (int jt = 0; jt < a.n_kv; ++jt) {
    t.j0 = int64_t{jt} * kTileCols;
    t.cols = tile_extent(a.sk, t.j0, kTileCols);
    TileStats* out =
        a.fwd_tiles != nullptr ? a.fwd_tiles + (t.bh * a.n_q + qt) * a.n_kv + jt : nullptr;
    if (tile_causally_hidden(a.causal, a.shift, t.i0, t.rows, t.j0) && a.fill_neg_inf &&
        a.kv_clean[bkv * a.n_kv + jt] != 0) {
      if (out != nullptr && threadIdx.x == 0) write_skipped_stats(t.rows, t.cols, out);
      continue;
    }
    if (t.stats != nullptr && threadIdx.x == 0) reset_accum(t.stats);
    load_tile(a.k + bkv * a.sk * a.dim, a.sk, a.dim, t.j0, a.dim_pad, t.k, ld_t(a.dim_pad));
    load_tile(a.v + bkv * a.sk * a.dim_v, a.sk, a.dim_v, t.j0, a.dim_v_pad, t.v, ld_t(a.dim_v_pad));
    __syncthreads();
    score_tile(a, t);
    mask_tile(a, t);
    online_softmax_update(a, t);
    accumulate_pv(a, t);
    if (out != nullptr && threadIdx.x == 0) write_tile_stats(*t.stats, out);
    __syncthreads();
  }
  forward_epilogue(a, t);
}

}  // namespace

template <typename T>
void launch_forward(const Args<T>& a, cudaStream_t stream) {
  const ForwardLayout lay(a.dim_pad, a.dim_v_pad, sizeof(T));
  const int bytes = static_cast<int>(lay.total);
  check_cuda(
      cudaFuncSetAttribute(forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
      "cudaFuncSetAttribute(forward_kernel)");
  const dim3 grid(static_cast<unsigned>(a.n_q), static_cast<unsigned>(a.batch * a.heads));
  forward_kernel<T><<<grid, kThreads, bytes, stream>>>(a);
  check_cuda(cudaGetLastError(), "forward_kernel launch");
}

template void launch_forward<float>(const Args<float>&, cudaStream_t);
template void launch_forward<__half>(const Args<__half>&, cudaStream_t);
template void launch_forward<__nv_bfloat16>(const Args<__nv_bfloat16>&, cudaStream_t);

}  // namespace attnscope::cuda
