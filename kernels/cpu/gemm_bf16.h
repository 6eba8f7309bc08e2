// Tile matmuls of bf16 operands by AVX512-BF16 dot products (vdpbf16ps): the fused kernels'
// bf16 matmuls under the instruction set "avx512bf16" (cpu_isa.h). Operands are bf16 values held
// in fp32 (round_to(bf16) leaves their low 16 bits zero); products are summed in fp32.
#pragma once

#include <cstdint>

namespace attnscope::cpu {

// True when this CPU runs AVX-512 F/BW/VL with AVX512-BF16.
bool cpu_has_avx512_bf16();

// A matmul operand already cut into pairs along k (32-bit words: the bf16 of the even k in the
// low half, of k + 1 in the high half; 0 past k), so that a driver pairs a loop-invariant
// operand once instead of once per tile. Null: gemm_tile_bf16 pairs that operand itself.
struct Bf16Pairs {
  const uint32_t* a = nullptr;  // pair p of A's row r at a[r * a_rs + p * a_ps]
  int64_t a_rs = 0, a_ps = 0;
  const uint32_t* b = nullptr;  // pair p of B's column x at b[p * ldb + x]
  int64_t ldb = 0;
  // A unpaired, with rows contiguous (a_cs = 1) or as a transposed X (a_rs = 1): its fp32
  // values are rounded to bf16 as they are paired (the bits round_to(bf16) gives, denormals
  // aside, which vdpbf16ps reads as 0 anyway), so A need not hold bf16 values.
  bool a_rounds = false;
};

// Words per row of paired columns (pair_columns): n rounded up to whole 16-lane registers.
int64_t paired_ld(int64_t n);

// out[r * ceil(k / 2) + p] = pair p of row r of X [m x k] (rows contiguous, row stride ldx):
// the layout of Bf16Pairs::a with a_rs = ceil(k / 2), a_ps = 1.
void pair_rows(int64_t m, int64_t k, const float* x, int64_t ldx, uint32_t* out);

// out[p * paired_ld(n) + c] = pair p of column c of X [k x n] (row stride ldx), 0 for c >= n:
// the layout of Bf16Pairs::b with ldb = paired_ld(n) (and of Bf16Pairs::a for A = X^T, with
// a_rs = 1, a_ps = paired_ld(n)).
void pair_columns(int64_t k, int64_t n, const float* x, int64_t ldx, uint32_t* out);

// pair_columns of X^T for X [n x k] with rows contiguous (row stride ldx): out[p * ldo + c] =
// pair p of row c of X, 0 for n <= c < ldo (ldo >= n). K's rows give K^T's pairs this way
// without an fp32 K^T.
void pair_rows_transposed(int64_t n, int64_t k, const float* x, int64_t ldx, int64_t ldo,
                          uint32_t* out);

// gemm_tile (tile_math.h) for A and B of bf16 values, same arguments and layouts. Each element
// of A B starts at +0 and takes, for t = 0, 2, 4, ... in order, one vdpbf16ps step that adds
// A(r, t + 1) B(t + 1, x), then A(r, t) B(t, x) (t + 1 = k counts as 0), rounded as that
// instruction rounds (nearest-even; denormal inputs and results are 0); then it is scaled by
// alpha and added to C (one FMA) as gemm_tile does. Operands `paired` holds are read from there
// (the same bits). Only where cpu_has_avx512_bf16().
void gemm_tile_bf16(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                    const float* b, int64_t ldb, float* c, int64_t ldc, float alpha,
                    bool accumulate, const Bf16Pairs& paired = {});

// out[r] = sum_x a[r][x] * b[r][x] of bf16 values for r < rows (a, b: [rows x n], rows
// contiguous), each exactly as gemm_tile_bf16 sums one element of C (so D_i = dO_i . O_i equals
// dP_ij = dO_i . V_j bit for bit wherever O_i = V_j).
void dot_rows_bf16(int64_t rows, int64_t n, const float* a, const float* b, float* out);

}  // namespace attnscope::cpu
