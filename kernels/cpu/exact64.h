// fp64 block products that round exactly as the naive reference's scalar loops
// (kernels/reference/reference_attention.cpp): every output element sums the same terms in the
// same order, multiplies and adds rounded separately (exact64.cpp is compiled with
// -ffp-contract=off), so results are bit-identical on every instruction set, lane count and
// thread count. Vectors and register blocks run across independent outputs, never along a sum.
#pragma once

#include <cstdint>

namespace attnscope::cpu {

// C[r][x] = a_r . b_x for r in [0, rows), x in [0, cols): a_r = a + r * lda (lda = 0: one row
// for all), b given transposed, bt[t * ldbt + x] = b_x[t], t in [0, n). Each dot is summed as
// the reference's dot(): four partial sums over t mod 4, the n mod 4 tail into the first, then
// (p0 + p1) + (p2 + p3).
void exact_dot_block(int64_t rows, int64_t cols, int64_t n, const double* a, int64_t lda,
                     const double* bt, int64_t ldbt, double* c, int64_t ldc);

// C[r][x] += a[r][t] * b[t][x] for t = 0 .. n-1 in that order, one rounded multiply and add per
// term, for r in [0, rows), x in [0, cols); a[r][t] = a[r * lda + t], b[t][x] = b[t * ldb + x]
// (ldb = 0: one row for every t). A term whose product is a zero leaves an accumulator that
// started at +0 exactly as skipping it would (a sum of doubles is -0 only when every term is).
void exact_gemm_update(int64_t rows, int64_t cols, int64_t n, const double* a, int64_t lda,
                       const double* b, int64_t ldb, double* c, int64_t ldc);

}  // namespace attnscope::cpu
