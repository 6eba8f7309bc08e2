// Dense fp32 building blocks of the CPU attention kernels: a register-blocked tile matmul
// (gemm_f32.cpp), transposes, a vectorised exp, row reductions and rounding to an emulated
// precision (tile_math.cpp). Every function sums in a fixed order, so results never depend on
// the calling thread.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/attn_params.h"
#include "kernels/attn_types.h"

namespace attnscope::cpu {

// Tile sizes of the fused kernels (kernels/attn_types.h) as the int64_t the CPU index math
// takes.
constexpr int64_t kTileRows = attnscope::kTileRows;  // Br
constexpr int64_t kTileCols = attnscope::kTileCols;  // Bc

// C = (accumulate ? C : 0) + alpha * (A B) with A [m x k], B [k x n], C [m x n]:
//   A(r, t) = a[r * a_rs + t * a_cs]   (any strides: pass a_rs = 1, a_cs = ld for A^T)
//   B(t, x) = b[t * ldb + x]           (rows contiguous)
//   C(r, x) = c[r * ldc + x]
// Each product is summed in fp32 over t = 0..k-1 in order, then scaled and added to C.
void gemm_tile(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
               const float* b, int64_t ldb, float* c, int64_t ldc, float alpha, bool accumulate);

// dst(x, r) = src(r, x): src [rows x cols] with row stride ld_src, dst [cols x rows] with row
// stride ld_dst; the elements' bits are copied unchanged (transpose.cpp). transpose_words: of
// 32-bit words, such as the bf16 pairs of gemm_bf16.h.
void transpose(int64_t rows, int64_t cols, const float* src, int64_t ld_src, float* dst,
               int64_t ld_dst);
void transpose_words(int64_t rows, int64_t cols, const uint32_t* src, int64_t ld_src, uint32_t* dst,
                     int64_t ld_dst);

// exp in fp32, within 2 ulp of the true value; exp(-inf) = 0, exp(+inf) = inf, NaN stays
// NaN, results below e^-86.5 (~2.6e-38, about the fp32 normal minimum) flush to 0.
float exp_f32(float x);

// finite_block_max's answer kept for a later reader; finite is false too when not computed.
struct BlockMax {
  bool finite = false;
  float max_shifted = 0, max_abs = 0;
};

// p[x] = exp(s[x] - base) for x < n; returns the fp32 sum of p, summed in dot_f32's order.
float exp_shifted_sum(const float* s, float base, float* p, int64_t n);

// p[r][x] = exp(s[r][x] - base[r]) * factor[r] for r < rows, x < cols (row stride ld).
void exp_shifted_scaled_rows(int64_t rows, int64_t cols, int64_t ld, const float* s,
                             const float* base, const float* factor, float* p);

// exp_shifted_scaled_rows, and from the same pass what finite_block_max(s, rows, cols, ld, base,
// max_shifted, max_abs) gives: the largest s - base and |s|, false when some s is NaN or inf.
bool exp_shifted_scaled_rows_max(int64_t rows, int64_t cols, int64_t ld, const float* s,
                                 const float* base, const float* factor, float* p,
                                 float* max_shifted, float* max_abs);

// The online-softmax update of one kv tile over `rows` (<= kTileRows) rows, all fp32 (see
// forward_stages.h, online_softmax_update): s, p [rows x cols] with row stride ld; m, l
// [rows]; acc [rows x dim_v] (unused when dim_v = 0). Per row: m_new = max(m, rowmax s) (NaN
// if any is), base = m_new or 0 when -inf, alpha = exp(m - base), p = exp(s - base),
// l = alpha * l + rowsum p (one FMA where the set has it), acc *= alpha, m = m_new; p is then
// stored rounded to `precision` (the matmul operand of P V; l sums the fp32 values). With s_max,
// also finite_block_max of s against the bases (m_new wherever it is finite) from the exp pass.
void online_softmax_rows(int64_t rows, int64_t cols, int64_t ld, const float* s, float* p, float* m,
                         float* l, float* acc, int64_t dim_v, Precision precision,
                         BlockMax* s_max = nullptr);

// ds = round_to(precision, p * (dp - d[r]) * gf) for the `rows` rows r of `cols` entries (row
// stride ld), multiplied in that order on every instruction set. Returns the largest |ds| stored
// when every dp and every stored ds is finite, +inf otherwise.
float softmax_grad_rows(int64_t rows, int64_t cols, int64_t ld, const float* p, const float* dp,
                        const float* d, const float* gf, Precision precision, float* ds);

// Largest of x[0:n]; NaN if any x is NaN (as torch.max); -inf when n = 0.
float max_propagating_nan(const float* x, int64_t n);

// max(a, b), NaN if either is NaN.
inline float max_propagating_nan(float a, float b) {
  return (b > a || b != b) && a == a ? b : a;
}

// sum_x a[x] * b[x] in fp32, in the order of LibTorch's portable reductions (x mod 8 lanes,
// then the lanes in order, then the n mod 8 last products) on every instruction set; each
// product is fused into its sum where the set has FMA.
float dot_f32(const float* a, const float* b, int64_t n);

// out[r] = sum_x a[r][x] * b[r][x] for r < rows (a, b: [rows x n], rows contiguous), in fp32,
// x = 0..n-1 in order, each product fused into the sum where the instruction set has FMA:
// exactly as gemm_tile sums one element of C. D_i = dO_i . O_i then equals dP_ij = dO_i . V_j
// bit for bit wherever O_i = V_j (a row with one visible key), so dS = P (dP - D) vanishes
// exactly there.
void dot_rows_f32_in_order(int64_t rows, int64_t n, const float* a, const float* b, float* out);

// sum_x x[x]^2 in fp64, x mod 8 lanes, then the lanes in order, then the n mod 8 last squares:
// the same bits on every instruction set (an fp32 square is exact in fp64).
double sum_squares(const float* x, int64_t n);

// dst[r][x] = value for r < rows, x < cols (row stride ld), in full vector stores.
void fill_rows(int64_t rows, int64_t cols, int64_t ld, float value, float* dst);

// x[0:n] *= alpha.
void scale_in_place(float* x, float alpha, int64_t n);

// row_max[r] = largest_magnitude of row r of x [rows x dim] (rows contiguous), for r < rows.
// Returns true when round_to(precision, x[i]) has the bits of x[i] for every entry (x already
// holds values of the precision; a NaN need not round to itself). One pass over x: all that
// prepare_inputs learns of an input.
bool row_maxima(Precision precision, const float* x, int64_t rows, int64_t dim, float* row_max);

// dst[0:n] = round_to(precision, src[0:n]); dst may equal src. f32 / f64 only copy.
void round_copy(Precision precision, const float* src, float* dst, int64_t n);

// round_copy of `rows` rows of `cols` values with row stride ld, in one call.
void round_rows(Precision precision, int64_t rows, int64_t cols, int64_t ld, const float* src,
                float* dst);

// Largest |x[i]| over x[0:n] (0 when n = 0); +inf when some entry is inf and none is NaN, a NaN
// when some entry is NaN.
float largest_magnitude(const float* x, int64_t n);

// Whether a largest_magnitude result says every entry was finite (false for inf and NaN).
inline bool magnitude_finite(float largest) {
  return largest <= std::numeric_limits<float>::max();
}

// True when every x[0:n] is finite.
bool all_finite(const float* x, int64_t n);

// Number of non-finite (NaN or +-inf) entries of x[0:n].
int64_t count_nonfinite(const float* x, int64_t n);

// Over the finite entries of x[0:n]: *max_abs = largest |x| (0 when none), *max = largest x
// (-inf when none). Returns the number of non-finite entries.
int64_t finite_max(const float* x, int64_t n, float* max_abs, float* max);

// Fast pass over a block x [rows x cols] (row stride ld) expected to be all finite:
// *max_abs = largest |x|, *max_shifted = largest x[r][c] - shift[r]. Returns false when some
// entry is NaN or inf (the outputs are then meaningless). row_cols (if given): row r is read
// only up to row_cols[r] <= cols entries (a causal tile's visible scores); a row of none adds
// nothing (max_shifted -inf, max_abs 0 when no row has any).
bool finite_block_max(const float* x, int64_t rows, int64_t cols, int64_t ld, const float* shift,
                      float* max_shifted, float* max_abs, const int64_t* row_cols = nullptr);

}  // namespace attnscope::cpu
