// Shared-memory layouts of the CUDA attention kernels and the per-tile statistics block, as
// plain host/device code (g++ compiles it into tests/gpu/device_math_test.cpp, which checks
// alignment, WMMA leading-dimension rules and that no two buffers overlap).
#pragma once

#include <cstdint>

#include "kernels/cuda/device_math.h"

namespace attnscope::cuda {

constexpr int kThreads = 128;  // 4 warps per CTA in every kernel
// Whole warps (block_matmul hands fragments to warps, the patch holds 256 floats per warp), and
// at least one thread per tile row (the row loops run `if (threadIdx.x < kTileRows)`).
static_assert(kThreads % 32 == 0, "CTAs are whole warps");
static_assert(kThreads >= kTileRows, "one thread per tile row");

// Per-tile statistics accumulated in shared memory while the stages run (instrumentation):
// non-finite counts [nan, +inf, -inf] per stage, masked entries, and two maxima as ordered ints.
struct TileAccum {
  int s[3], p[3], acc[3], dp[3], ds[3], dq[3], dk[3], dv[3];
  int masked;
  int max_abs_s;    // ordered_int of max |S| over finite visible scores
  int max_exp_arg;  // ordered_int of max S - m over finite visible scores
};

// Monotone map float -> int (and back: it is its own inverse), for atomicMax on floats.
ATTNSCOPE_HD int ordered_int(float x) {
  const int i = static_cast<int>(bits_of(x));
  return i >= 0 ? i : i ^ 0x7fffffff;
}
ATTNSCOPE_HD float ordered_float(int i) {
  return float_of(static_cast<uint32_t>(i >= 0 ? i : i ^ 0x7fffffff));
}

// Leading dimensions (elements) of the shared tiles: T tiles padded by 8 elements, fp32 tiles
// by 4, so WMMA's ldm rules hold (multiple of 8 for 16-bit, 4 for fp32) and rows start on
// different banks.
ATTNSCOPE_HD int ld_t(int cols) {
  return cols + 8;
}
ATTNSCOPE_HD int ld_f(int cols) {
  return cols + 4;
}
ATTNSCOPE_HD int64_t align128(int64_t bytes) {
  return (bytes + 127) / 128 * 128;
}
ATTNSCOPE_HD int pad16(int64_t n) {
  return static_cast<int>((n + 15) / 16 * 16);
}

// Byte offsets of the forward kernel's shared buffers (element size `es` of T):
// q, k [64 x ld_t(Dp)] T; v [64 x ld_t(Dvp)] T; s [64 x ld_f(64)] fp32; p [64 x ld_t(64)] T;
// acc [64 x ld_f(Dvp)] fp32; rows: m, l, alpha (fp32), causes (u32), 64 each; cls [64 x 64]
// MaskedEntry; the TileAccum of the current tile.
struct ForwardLayout {
  int64_t q, k, v, s, p, acc, rows, cls, accum, total;
  ATTNSCOPE_HD ForwardLayout(int dp, int dvp, int es) {
    q = 0;
    k = q + align128(int64_t{kTileRows} * ld_t(dp) * es);
    v = k + align128(int64_t{kTileCols} * ld_t(dp) * es);
    s = v + align128(int64_t{kTileCols} * ld_t(dvp) * es);
    p = s + align128(int64_t{kTileRows} * ld_f(kTileCols) * 4);
    acc = p + align128(int64_t{kTileRows} * ld_t(kTileCols) * es);
    rows = acc + align128(int64_t{kTileRows} * ld_f(dvp) * 4);
    cls = rows + 4 * kTileRows * 4;
    accum = cls + kTileRows * kTileCols;
    total = accum + align128(sizeof(TileAccum));
  }
};

// Byte offsets of the backward main loop's shared buffers: k [64 x ld_t(Dp)], v [64 x
// ld_t(Dvp)], q [64 x ld_t(Dp)], dout [64 x ld_t(Dvp)] T; s (S, then dP), gf, p [64 x ld_f(64)]
// fp32; lo (round(P), then dS) [64 x ld_t(64)] T; dk [64 x ld_f(Dp)], dv [64 x ld_f(Dvp)] fp32;
// patch: 16 x 16 fp32 per warp; rows: m, l, d (fp32), causes (u32), 64 each; cls, accum as
// in ForwardLayout.
struct BackwardLayout {
  int64_t k, v, q, dout, s, gf, p, lo, dk, dv, patch, rows, cls, accum, total;
  ATTNSCOPE_HD BackwardLayout(int dp, int dvp, int es) {
    k = 0;
    v = k + align128(int64_t{kTileCols} * ld_t(dp) * es);
    q = v + align128(int64_t{kTileCols} * ld_t(dvp) * es);
    dout = q + align128(int64_t{kTileRows} * ld_t(dp) * es);
    s = dout + align128(int64_t{kTileRows} * ld_t(dvp) * es);
    gf = s + align128(int64_t{kTileRows} * ld_f(kTileCols) * 4);
    p = gf + align128(int64_t{kTileRows} * ld_f(kTileCols) * 4);
    lo = p + align128(int64_t{kTileRows} * ld_f(kTileCols) * 4);
    dk = lo + align128(int64_t{kTileRows} * ld_t(kTileCols) * es);
    dv = dk + align128(int64_t{kTileCols} * ld_f(dp) * 4);
    patch = dv + align128(int64_t{kTileCols} * ld_f(dvp) * 4);
    rows = patch + align128((kThreads / 32) * 256 * 4);
    cls = rows + 4 * kTileRows * 4;
    accum = cls + kTileRows * kTileCols;
    total = accum + align128(sizeof(TileAccum));
  }
};

}  // namespace attnscope::cuda
