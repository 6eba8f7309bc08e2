// The CUDA FlashAttention-2 backward, with the stages of the CPU kernel (backward_stages.h):
// backward_preprocess (D) per q tile; the main loop, one CTA per (batch, kv head, kv tile j)
// walking every query head of the kv group and every q tile i through score_tile -> mask_tile
// -> recompute_p -> accumulate_dv -> compute_dp -> compute_ds -> accumulate_dq ->
// accumulate_dk; backward_postprocess stores dK_j, dV_j (rounded once) and then dQ.
// Forward differentiated: s_ij = f(scale q_i.k_j), p = softmax(s), o_i = sum_j p_ij v_j;
// dv_j = sum_i p_ij dO_i, dp_ij = dO_i.v_j, D_i = dO_i.o_i, ds_ij = p_ij (dp_ij - D_i) f'_ij,
// dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i. The scale is applied once, when
// dQ, dK are stored; dQ is accumulated in fp32 with atomics (order-dependent in the last bits).
#include "kernels/cuda/cuda_kernels.cuh"

namespace attnscope::cuda {
namespace {

template <typename T>
struct BwdTile {
  T *k, *v, *q, *dout, *lo;
  float *s, *gf, *p, *dk, *dv, *patch, *m, *l, *d;
  uint8_t* cls;
  TileAccum* stats;  // null when not tracing
  int64_t b, h, bh, i0, j0;
  int rows, cols;
};

// S = scale * Q_i K_j^T, softcap (gf = its derivative), + bias; then mask_tile: masked scores
// take the fill and gf = 0 (no gradient through a constant); padding -inf.
template <typename T>
__device__ void score_and_mask_tile(const Args<T>& a, const BwdTile<T>& t) {
  block_matmul<T, false, true>(kTileRows, kTileCols, a.dim_pad, t.q, ld_t(a.dim_pad), t.k,
                               ld_t(a.dim_pad), t.s, ld_f(kTileCols), false);
  __syncthreads();
  for (int e = threadIdx.x; e < kTileRows * kTileCols; e += blockDim.x) {
    const int r = e / kTileCols, c = e % kTileCols;
    float* s = t.s + r * ld_f(kTileCols) + c;
    float* gf = t.gf + r * ld_f(kTileCols) + c;
    if (r >= t.rows || c >= t.cols) {
      *s = -pos_inf();
      *gf = 0;
      t.cls[e] = kEntryPadding;
      continue;
    }
    const int64_t i = t.i0 + r, j = t.j0 + c;
    const float scaled = *s * a.scale;
    float v =
        apply_softcap(scaled, a.softcap, a.softcap > 0 ? tanhf(scaled / a.softcap) : 0.0f, gf);
    const float bias = a.bias != nullptr ? a.bias[broadcast_offset(a.bias_st, t.b, t.h, i, j)] : 0;
    v += bias;
    bool hidden = a.causal && j > i + a.shift;
    if (a.mask != nullptr) hidden |= a.mask[broadcast_offset(a.mask_st, t.b, t.h, i, j)] == 0;
    if (hidden) {
      v = a.fill;
      *gf = 0;
    }
    *s = v;
    t.cls[e] = hidden ? kEntryFillMasked : bias <= kBiasSentinel ? kEntryBiasMasked : kEntryVisible;
    if (t.stats == nullptr) continue;
    if (t.cls[e] != kEntryVisible) {
      atomicAdd(&t.stats->masked, 1);
    } else if (is_finite(v)) {
      atomicMax(&t.stats->max_abs_s, ordered_int(fabsf(v)));
      atomicMax(&t.stats->max_exp_arg, ordered_int(v - t.m[r]));
    } else {
      count_nonfinite(t.stats->s, v);
    }
  }
  __syncthreads();
}

// P = exp(S - m) / l with the forward's fp32 m, l (0 for an empty row under `safe`; padding 0);
// then accumulate_dv: dV_j += round(P)^T dO_i.
template <typename T>
__device__ void recompute_p_and_accumulate_dv(const Args<T>& a, const BwdTile<T>& t) {
  for (int e = threadIdx.x; e < kTileRows * kTileCols; e += blockDim.x) {
    const int r = e / kTileCols, c = e % kTileCols;
    float p = 0;
    if (t.cls[e] != kEntryPadding && !(a.safe && t.m[r] == -pos_inf())) {
      p = expf(t.s[r * ld_f(kTileCols) + c] - t.m[r]) * (1.0f / t.l[r]);
    }
    t.p[r * ld_f(kTileCols) + c] = p;
    t.lo[r * ld_t(kTileCols) + c] = store_f<T>(p);
    if (t.stats != nullptr && t.cls[e] != kEntryPadding) count_nonfinite(t.stats->p, p);
  }
  __syncthreads();
  block_matmul<T, true, false>(kTileCols, a.dim_v_pad, kTileRows, t.lo, ld_t(kTileCols), t.dout,
                               ld_t(a.dim_v_pad), t.dv, ld_f(a.dim_v_pad), true);
  __syncthreads();
}

// compute_dp: dP = dO_i V_j^T (fp32, into t.s); compute_ds: dS = round(P (dP - D) gf) into
// t.lo (padding 0). A non-finite dP / dS flags the row's gradient-overflow cause.
template <typename T>
__device__ void compute_dp_and_ds(const Args<T>& a, const BwdTile<T>& t) {
  block_matmul<T, false, true>(kTileRows, kTileCols, a.dim_v_pad, t.dout, ld_t(a.dim_v_pad), t.v,
                               ld_t(a.dim_v_pad), t.s, ld_f(kTileCols), false);
  __syncthreads();
  for (int e = threadIdx.x; e < kTileRows * kTileCols; e += blockDim.x) {
    const int r = e / kTileCols, c = e % kTileCols;
    if (t.cls[e] == kEntryPadding) {
      t.lo[r * ld_t(kTileCols) + c] = store_f<T>(0.0f);
      continue;
    }
    const float dp = t.s[r * ld_f(kTileCols) + c];
    const float ds_f = t.p[r * ld_f(kTileCols) + c] * (dp - t.d[r]) * t.gf[r * ld_f(kTileCols) + c];
    const T ds = store_f<T>(ds_f);
    t.lo[r * ld_t(kTileCols) + c] = ds;
    if (t.stats == nullptr) continue;
    count_nonfinite(t.stats->dp, dp);
    count_nonfinite(t.stats->ds, load_f(ds));
    if ((!is_finite(dp) || !is_finite(load_f(ds))) && a.row_causes != nullptr) {
      atomicOr(a.row_causes + t.bh * a.sq + t.i0 + r, kCauseGradOverflow);
    }
  }
  __syncthreads();
}

// accumulate_dq: dQ_i += dS K_j (fp32 atomics into dq_acc); accumulate_dk: dK_j += dS^T Q_i.
template <typename T>
__device__ void accumulate_dq_dk(const Args<T>& a, const BwdTile<T>& t) {
  block_matmul<T, false, false>(kTileRows, a.dim_pad, kTileCols, t.lo, ld_t(kTileCols), t.k,
                                ld_t(a.dim_pad), a.dq_acc + (t.bh * a.sq + t.i0) * a.dim, a.dim,
                                false, t.patch, t.rows, static_cast<int>(a.dim));
  block_matmul<T, true, false>(kTileCols, a.dim_pad, kTileRows, t.lo, ld_t(kTileCols), t.q,
                               ld_t(a.dim_pad), t.dk, ld_f(a.dim_pad), true);
  __syncthreads();
  if (t.stats == nullptr) return;
  for (int e = threadIdx.x; e < t.cols * a.dim; e += blockDim.x) {
    count_nonfinite(t.stats->dk, t.dk[(e / a.dim) * ld_f(a.dim_pad) + e % a.dim]);
  }
  for (int e = threadIdx.x; e < t.cols * a.dim_v; e += blockDim.x) {
    count_nonfinite(t.stats->dv, t.dv[(e / a.dim_v) * ld_f(a.dim_v_pad) + e % a.dim_v]);
  }
  __syncthreads();
}

template <typename T>
__global__ void __launch_bounds__(kThreads) backward_kernel(Args<T> a) {
  extern __shared__ __align__(128) unsigned char smem[];
  const BackwardLayout lay(a.dim_pad, a.dim_v_pad, sizeof(T));
  BwdTile<T> t;
  t.k = reinterpret_cast<T*>(smem + lay.k);
  t.v = reinterpret_cast<T*>(smem + lay.v);
  t.q = reinterpret_cast<T*>(smem + lay.q);
  t.dout = reinterpret_cast<T*>(smem + lay.dout);
  t.lo = reinterpret_cast<T*>(smem + lay.lo);
  t.s = reinterpret_cast<float*>(smem + lay.s);
  t.gf = reinterpret_cast<float*>(smem + lay.gf);
  t.p = reinterpret_cast<float*>(smem + lay.p);
  t.dk = reinterpret_cast<float*>(smem + lay.dk);
  t.dv = reinterpret_cast<float*>(smem + lay.dv);
  t.patch = reinterpret_cast<float*>(smem + lay.patch);
  t.m = reinterpret_cast<float*>(smem + lay.rows);
  t.l = t.m + kTileRows;
  t.d = t.l + kTileRows;
  t.cls = smem + lay.cls;
  t.stats = a.bwd_tiles != nullptr ? reinterpret_cast<TileAccum*>(smem + lay.accum) : nullptr;
  const int jt = blockIdx.x;
  const int64_t bkv = blockIdx.y, kvh = bkv % a.kv_heads;
  t.b = bkv / a.kv_heads;
  t.j0 = int64_t{jt} * kTileCols;
  t.cols = tile_extent(a.sk, t.j0, kTileCols);
  const bool kv_clean = a.kv_clean[bkv * a.n_kv + jt] != 0;

  load_tile(a.k + bkv * a.sk * a.dim, a.sk, a.dim, t.j0, a.dim_pad, t.k, ld_t(a.dim_pad));
  load_tile(a.v + bkv * a.sk * a.dim_v, a.sk, a.dim_v, t.j0, a.dim_v_pad, t.v, ld_t(a.dim_v_pad));
  for (int e = threadIdx.x; e < kTileCols * a.dim_pad; e += blockDim.x) {
    t.dk[(e / a.dim_pad) * ld_f(a.dim_pad) + e % a.dim_pad] = 0.0f;
  }
  for (int e = threadIdx.x; e < kTileCols * a.dim_v_pad; e += blockDim.x) {
    t.dv[(e / a.dim_v_pad) * ld_f(a.dim_v_pad) + e % a.dim_v_pad] = 0.0f;
  }
  __syncthreads();
  for (t.h = kvh * a.group; t.h < (kvh + 1) * a.group; ++t.h) {
    t.bh = t.b * a.heads + t.h;
    for (int qt = 0; qt < a.n_q; ++qt) {
      t.i0 = int64_t{qt} * kTileRows;
      t.rows = tile_extent(a.sq, t.i0, kTileRows);
      TileStats* out =
          a.bwd_tiles != nullptr ? a.bwd_tiles + (t.bh * a.n_q + qt) * a.n_kv + jt : nullptr;
      if (tile_causally_hidden(a.causal, a.shift, t.i0, t.rows, t.j0) && a.fill_neg_inf &&
          kv_clean && a.q_clean[t.bh * a.n_q + qt] != 0) {
        if (out != nullptr && threadIdx.x == 0) write_skipped_stats(t.rows, t.cols, out);
        continue;
      }
      if (t.stats != nullptr && threadIdx.x == 0) reset_accum(t.stats);
      const int64_t row0 = t.bh * a.sq + t.i0;
      load_tile(a.q + t.bh * a.sq * a.dim, a.sq, a.dim, t.i0, a.dim_pad, t.q, ld_t(a.dim_pad));
      load_tile(a.dout + t.bh * a.sq * a.dim_v, a.sq, a.dim_v, t.i0, a.dim_v_pad, t.dout,
                ld_t(a.dim_v_pad));
      if (threadIdx.x < kTileRows) {
        const bool in = threadIdx.x < t.rows;
        t.m[threadIdx.x] = in ? a.m[row0 + threadIdx.x] : 0.0f;
        t.l[threadIdx.x] = in ? a.l[row0 + threadIdx.x] : 1.0f;
        t.d[threadIdx.x] = in ? a.d[row0 + threadIdx.x] : 0.0f;
      }
      __syncthreads();
      score_and_mask_tile(a, t);
      recompute_p_and_accumulate_dv(a, t);
      compute_dp_and_ds(a, t);
      accumulate_dq_dk(a, t);
      if (out != nullptr && threadIdx.x == 0) write_tile_stats(*t.stats, out);
      __syncthreads();
    }
  }
  // backward_postprocess of kv tile j: dK_j = round(scale * acc), dV_j = round(acc).
  for (int e = threadIdx.x; e < t.cols * a.dim; e += blockDim.x) {
    const int c = e / a.dim, x = e % a.dim;
    a.dk[(bkv * a.sk + t.j0 + c) * a.dim + x] = store_f<T>(a.scale * t.dk[c * ld_f(a.dim_pad) + x]);
  }
  for (int e = threadIdx.x; e < t.cols * a.dim_v; e += blockDim.x) {
    const int c = e / a.dim_v, x = e % a.dim_v;
    a.dv[(bkv * a.sk + t.j0 + c) * a.dim_v + x] = store_f<T>(t.dv[c * ld_f(a.dim_v_pad) + x]);
  }
}

// D_i = dO_i . O_i in fp32 per row of a q tile, and whether the tile is clean for skipping:
// q, dO, D finite and every row's P exactly 0 where masked (finite m, l or a safe empty row).
template <typename T>
__global__ void __launch_bounds__(kThreads) backward_preprocess_kernel(Args<T> a) {
  const int64_t bh = blockIdx.y, i0 = int64_t{blockIdx.x} * kTileRows;
  const int rows = tile_extent(a.sq, i0, kTileRows);
  bool ok = true;
  if (static_cast<int>(threadIdx.x) < rows) {
    const int64_t row = bh * a.sq + i0 + threadIdx.x;
    float d = 0;
    for (int64_t c = 0; c < a.dim_v; ++c) {
      const float g = load_f(a.dout[row * a.dim_v + c]);
      d += g * load_f(a.o[row * a.dim_v + c]);
      ok &= is_finite(g);
    }
    for (int64_t c = 0; c < a.dim; ++c) ok &= is_finite(load_f(a.q[row * a.dim + c]));
    a.d[row] = d;
    const float m = a.m[row];
    ok &= is_finite(d) && ((a.safe && m == -pos_inf()) || (is_finite(m) && is_finite(a.l[row])));
  }
  ok = __syncthreads_and(ok) != 0;
  if (threadIdx.x == 0) a.q_clean[bh * a.n_q + blockIdx.x] = ok ? 1 : 0;
}

// backward_postprocess of dQ: dq = round(scale * dq_acc).
template <typename T>
__global__ void backward_postprocess_dq_kernel(Args<T> a, int64_t n) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < n;
       e += int64_t{gridDim.x} * blockDim.x) {
    a.dq[e] = store_f<T>(a.scale * a.dq_acc[e]);
  }
}

}  // namespace

template <typename T>
void launch_backward_preprocess(const Args<T>& a, cudaStream_t stream) {
  check_cuda(cudaMemsetAsync(a.dq_acc, 0, sizeof(float) * a.batch * a.heads * a.sq * a.dim, stream),
             "cudaMemsetAsync(dq_acc)");
  const dim3 grid(static_cast<unsigned>(a.n_q), static_cast<unsigned>(a.batch * a.heads));
  backward_preprocess_kernel<T><<<grid, kThreads, 0, stream>>>(a);
  check_cuda(cudaGetLastError(), "backward_preprocess_kernel launch");
}

template <typename T>
void launch_backward(const Args<T>& a, cudaStream_t stream) {
  const BackwardLayout lay(a.dim_pad, a.dim_v_pad, sizeof(T));
  const int bytes = static_cast<int>(lay.total);
  check_cuda(
      cudaFuncSetAttribute(backward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
      "cudaFuncSetAttribute(backward_kernel)");
  const dim3 grid(static_cast<unsigned>(a.n_kv), static_cast<unsigned>(a.batch * a.kv_heads));
  backward_kernel<T><<<grid, kThreads, bytes, stream>>>(a);
  check_cuda(cudaGetLastError(), "backward_kernel launch");
  const int64_t n = a.batch * a.heads * a.sq * a.dim;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65535));
  backward_postprocess_dq_kernel<T><<<blocks, 256, 0, stream>>>(a, n);
  check_cuda(cudaGetLastError(), "backward_postprocess_dq_kernel launch");
}

template void launch_backward_preprocess<float>(const Args<float>&, cudaStream_t);
template void launch_backward_preprocess<__half>(const Args<__half>&, cudaStream_t);
template void launch_backward_preprocess<__nv_bfloat16>(const Args<__nv_bfloat16>&, cudaStream_t);
template void launch_backward<float>(const Args<float>&, cudaStream_t);
template void launch_backward<__half>(const Args<__half>&, cudaStream_t);
template void launch_backward<__nv_bfloat16>(const Args<__nv_bfloat16>&, cudaStream_t);

}  // namespace attnscope::cuda
