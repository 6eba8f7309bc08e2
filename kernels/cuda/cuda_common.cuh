// Internal to kernels/cuda: the kernel argument block, storage-type conversions, shared-memory
// statistics helpers and the block-wide tile matmul (WMMA 16x16x16 on tensor cores for fp16 /
// bf16 on sm_80+, an fp32 loop otherwise).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/attn_params.h"
#include "kernels/attn_trace.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/tile_layout.h"

namespace attnscope::cuda {

// Everything a kernel reads, passed by value. T: storage type of q, k, v, dO, o, dq, dk, dv.
// Layouts as AttnParams (BHSD, contiguous); lse, m, l, d, dq_acc fp32.
template <typename T>
struct Args {
  int64_t batch, heads, kv_heads, sq, sk, dim, dim_v, group;
  int dim_pad, dim_v_pad;  // D, Dv rounded up to 16
  int n_q, n_kv;           // tiles of kTileRows rows / kTileCols keys
  float scale, softcap, fill;
  bool causal, safe, fill_neg_inf;
  int64_t shift;  // causal diagonal: key j hidden from query i iff j > i + shift
  Precision precision;
  const uint8_t* mask;  // nullable, broadcast by mask_st
  BroadcastStrides mask_st;
  const float* bias;  // nullable, already rounded to the precision, broadcast by bias_st
  BroadcastStrides bias_st;
  const T *q, *k, *v, *dout;
  T* o;
  float *lse, *m, *l, *d, *dq_acc;
  T *dq, *dk, *dv;
  const uint8_t* kv_clean;  // [B * Hk * n_kv] finite K and V tile
  uint8_t* q_clean;         // [B * H * n_q] backward_skips' q-tile condition
  // Instrumentation, all null when off.
  TileStats* fwd_tiles;  // [B, H, n_q, n_kv]
  TileStats* bwd_tiles;  // [B, H, n_q, n_kv]
  uint32_t* row_causes;  // [B, H, Sq] RowCause flags
};

// Storage conversions through the shared bit-exact rounding of device_math.h.
template <typename T>
__device__ __forceinline__ float load_f(T x);
template <>
__device__ __forceinline__ float load_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float load_f<__half>(__half x) {
  return from_half_bits(__half_as_ushort(x));
}
template <>
__device__ __forceinline__ float load_f<__nv_bfloat16>(__nv_bfloat16 x) {
  return from_bf16_bits(__bfloat16_as_ushort(x));
}

template <typename T>
__device__ __forceinline__ T store_f(float x);
template <>
__device__ __forceinline__ float store_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half store_f<__half>(float x) {
  return __ushort_as_half(to_half_bits(x));
}
template <>
__device__ __forceinline__ __nv_bfloat16 store_f<__nv_bfloat16>(float x) {
  return __ushort_as_bfloat16(to_bf16_bits(x));
}

// Whether T runs on tensor cores in this compilation pass (WMMA for 16-bit types, sm_80+).
template <typename T>
__device__ constexpr bool use_wmma() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return !std::is_same<T, float>::value;
#else
  return false;
#endif
}

// C [M x N] (fp32, row stride ldc) = (accumulate ? C : 0) + A B with
//   A(r, t) = a_col ? a[t * lda + r] : a[r * lda + t]        (T, shared)
//   B(t, x) = b_col ? b[x * ldb + t] : b[t * ldb + x]        (T, shared)
// M, N, K multiples of 16, pointers 32-byte aligned. With `patch` (one 16 x 16 fp32 buffer per
// warp) C is global: each product block is atomically added to C (rows < row_lim, cols <
// col_lim) instead of stored. Called by all threads of the CTA; no barrier inside.
template <typename T, bool a_col, bool b_col>
__device__ void block_matmul(int M, int N, int K, const T* a, int lda, const T* b, int ldb,
                             float* c, int64_t ldc, bool accumulate, float* patch = nullptr,
                             int row_lim = 0, int col_lim = 0) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  if constexpr (use_wmma<T>()) {
    namespace w = nvcuda::wmma;
    using ALayout = typename std::conditional<a_col, w::col_major, w::row_major>::type;
    using BLayout = typename std::conditional<b_col, w::col_major, w::row_major>::type;
    const int tiles_n = N / 16;
    for (int tile = warp; tile < (M / 16) * tiles_n; tile += warps) {
      const int r0 = tile / tiles_n * 16, c0 = tile % tiles_n * 16;
      w::fragment<w::accumulator, 16, 16, 16, float> acc;
      if (accumulate && patch == nullptr) {
        w::load_matrix_sync(acc, c + r0 * ldc + c0, static_cast<unsigned>(ldc), w::mem_row_major);
      } else {
        w::fill_fragment(acc, 0.0f);
      }
      for (int k0 = 0; k0 < K; k0 += 16) {
        w::fragment<w::matrix_a, 16, 16, 16, T, ALayout> fa;
        w::fragment<w::matrix_b, 16, 16, 16, T, BLayout> fb;
        w::load_matrix_sync(fa, a_col ? a + k0 * lda + r0 : a + r0 * lda + k0, lda);
        w::load_matrix_sync(fb, b_col ? b + c0 * ldb + k0 : b + k0 * ldb + c0, ldb);
        w::mma_sync(acc, fa, fb, acc);
      }
      if (patch == nullptr) {
        w::store_matrix_sync(c + r0 * ldc + c0, acc, static_cast<unsigned>(ldc), w::mem_row_major);
      } else {
        float* mine = patch + warp * 256;
        w::store_matrix_sync(mine, acc, 16, w::mem_row_major);
        __syncwarp();
        for (int e = lane; e < 256; e += 32) {
          const int r = r0 + e / 16, x = c0 + e % 16;
          if (r < row_lim && x < col_lim) atomicAdd(c + r * ldc + x, mine[e]);
        }
        __syncwarp();
      }
    }
  } else {
    for (int e = threadIdx.x; e < M * N; e += blockDim.x) {
      const int r = e / N, x = e % N;
      float sum = 0;
      for (int t = 0; t < K; ++t) {
        const float av = load_f(a_col ? a[t * lda + r] : a[r * lda + t]);
        const float bv = load_f(b_col ? b[x * ldb + t] : b[t * ldb + x]);
        sum += av * bv;
      }
      if (patch != nullptr) {
        if (r < row_lim && x < col_lim) atomicAdd(c + r * ldc + x, sum);
      } else {
        c[r * ldc + x] = accumulate ? c[r * ldc + x] + sum : sum;
      }
    }
  }
}

// Copies rows [row0, row0 + kTileRows) x cols [0, cols_pad) of a [n_rows x cols] T matrix into
// a shared [kTileRows x ld] tile, zero outside the matrix. Q tiles and K / V tiles both load
// through it, so the two tile sizes must agree.
static_assert(kTileRows == kTileCols, "load_tile copies q, k and v tiles of one height");
template <typename T>
__device__ void load_tile(const T* src, int64_t n_rows, int64_t cols, int64_t row0, int cols_pad,
                          T* dst, int ld) {
  for (int e = threadIdx.x; e < kTileRows * cols_pad; e += blockDim.x) {
    const int r = e / cols_pad, x = e % cols_pad;
    const bool inside = row0 + r < n_rows && x < cols;
    dst[r * ld + x] = inside ? src[(row0 + r) * cols + x] : store_f<T>(0.0f);
  }
}

// Adds n to a shared counter when n > 0 (tile statistics).
__device__ __forceinline__ void count_add(int* counter, int n) {
  if (n > 0) atomicAdd(counter, n);
}

// Counts x in counts[nonfinite_class(x) - 1] when it is not finite.
__device__ __forceinline__ void count_nonfinite(int* counts, float x) {
  const int cls = nonfinite_class(x);
  if (cls != 0) atomicAdd(counts + cls - 1, 1);
}

// Resets the accumulator (thread 0; a barrier must follow).
__device__ __forceinline__ void reset_accum(TileAccum* acc) {
  int* words = reinterpret_cast<int*>(acc);
  for (size_t e = 0; e < sizeof(TileAccum) / sizeof(int); ++e) words[e] = 0;
  acc->max_abs_s = ordered_int(0.0f);
  acc->max_exp_arg = ordered_int(-pos_inf());
}

// Writes the accumulated statistics of a computed tile (thread 0, after a barrier).
__device__ __forceinline__ void write_tile_stats(const TileAccum& acc, TileStats* out) {
  const auto put = [](NonfiniteCount& dst, const int* src) {
    dst.nan = src[0];
    dst.pos_inf = src[1];
    dst.neg_inf = src[2];
  };
  out->max_abs_s = ordered_float(acc.max_abs_s);
  out->max_exp_arg = ordered_float(acc.max_exp_arg);
  out->masked = acc.masked;
  out->computed = 1;
  put(out->s, acc.s);
  put(out->p, acc.p);
  put(out->acc, acc.acc);
  put(out->dp, acc.dp);
  put(out->ds, acc.ds);
  put(out->dq, acc.dq);
  put(out->dk, acc.dk);
  put(out->dv, acc.dv);
}

// Writes the statistics of a skipped tile: every entry masked, nothing computed.
__device__ __forceinline__ void write_skipped_stats(int rows, int cols, TileStats* out) {
  TileAccum none;
  reset_accum(&none);
  none.masked = rows * cols;
  write_tile_stats(none, out);
  out->computed = 0;
}

// Launch check: throws std::runtime_error naming `what` and the CUDA error.
void check_cuda(cudaError_t status, const char* what);

}  // namespace attnscope::cuda
