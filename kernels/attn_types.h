// The kernels' shared vocabulary beside AttnParams, plain C++ for the CPU and CUDA kernels and
// their callers: the emulated kernel (Mode), the tile sizes, the class of a score entry and of
// an element or heatmap cell, element counts, the cause flags of a query row and the
// provenance they resolve to, the backward's step stages, and a window of the score matrix.
// Names of these enums: kernels/attn_names.h.
#pragma once

#include <cstdint>

// Functions that CUDA device code calls as well (kernels/cuda compiles this header with nvcc).
#if defined(__CUDACC__)
#define ATTNSCOPE_HD __host__ __device__ __forceinline__
#else
#define ATTNSCOPE_HD inline
#endif

namespace attnscope {

// Which kernel the CPU emulates at params.precision (f32, f16, bf16; f64 runs as f32):
//   fused:   FlashAttention-2. Q, K, V, dO (and bias) rounded to the precision; matmuls, the
//            online softmax, m, l, LSE and D in fp32; P rounded before P V and P^T dO; dS
//            rounded before dS K and dS^T Q; dQ accumulated in fp32; O, dQ, dK, dV rounded
//            once when stored. The mask fill value stays fp32 (-1e9 stays finite). Dropout:
//            round(P) o keep is the operand of P V and P^T dO; 1 / (1 - p) in fp32 multiplies
//            1 / l in the forward epilogue, dP before dS and dV's accumulator before its store.
//            The backward's P follows AttnParams::backward_p (from m and l, or exp(S - LSE)).
//   unfused: eager math attention. Every op's output rounded: Q K^T, the scaling, softcap,
//            bias add, the fill value, softmax (computed in fp32 from rounded scores), dropout
//            (P * round(1 / (1 - p))), P V, LSE, and in the backward dV, dP (and its dropout),
//            dS, the softcap and scale multiplies, dQ, dK. The backward uses the saved softmax
//            output whatever AttnParams::backward_p says.
// The CUDA kernels implement `fused`.
enum class Mode : uint8_t { fused, unfused };

// Tile sizes of the fused kernels, CPU and CUDA alike: Br query rows by Bc keys. Traces, the
// stepper and the pooled capture index tiles by them.
constexpr int kTileRows = 64;  // Br
constexpr int kTileCols = 64;  // Bc
// The CUDA kernels cut a tile into 16 x 16 WMMA fragments (block_matmul covers M / 16 x N / 16
// of them and drops a remainder); the CPU micro-kernels cover a full tile row with 16-wide
// blocks of two 8-lane AVX2 registers, without a scalar tail.
static_assert(kTileRows % 16 == 0 && kTileCols % 16 == 0, "tiles are whole 16 x 16 fragments");

// Class of a score entry (tile stats, head matrices, the stepper's tiles).
enum MaskedEntry : uint8_t {
  kEntryVisible = 0,
  kEntryFillMasked = 1,  // bool mask 0 or causally hidden: the score is the fill value
  kEntryBiasMasked = 2,  // a bias entry <= kBiasSentinel (an additive float mask)
  kEntryPadding = 3,     // CUDA shared tiles only: past the last query row or key
};

// Class of an element, of a pooled block of elements, and of a heatmap cell. An element is
// NaN (even where masked), masked (any other value at a masked position), +inf, -inf or
// finite. A block takes its worst entry's class (NaN, then +inf, then -inf), else masked when
// it has no finite entry, else finite (cell_class). Heatmaps draw the non-finite and masked
// classes as overlays; only finite cells go through the colormap.
enum class CellClass : uint8_t { finite = 0, nan, pos_inf, neg_inf, masked };

// The class of a block from the counts of its entries by class.
ATTNSCOPE_HD CellClass cell_class(int64_t nan, int64_t pos_inf, int64_t neg_inf, int64_t finite) {
  return nan > 0       ? CellClass::nan
         : pos_inf > 0 ? CellClass::pos_inf
         : neg_inf > 0 ? CellClass::neg_inf
         : finite == 0 ? CellClass::masked
                       : CellClass::finite;
}

// Elements counted by CellClass (elements, not cells: a pooled cell may hold many); sums over
// tensors and matrices.
struct CellCounts {
  int64_t finite = 0, nan = 0, pos_inf = 0, neg_inf = 0, masked = 0;

  int64_t nonfinite() const { return nan + pos_inf + neg_inf; }
  void add(CellClass cls, int64_t n = 1) {
    switch (cls) {
      case CellClass::finite:
        finite += n;
        break;
      case CellClass::nan:
        nan += n;
        break;
      case CellClass::pos_inf:
        pos_inf += n;
        break;
      case CellClass::neg_inf:
        neg_inf += n;
        break;
      case CellClass::masked:
        masked += n;
        break;
    }
  }
  CellCounts& operator+=(const CellCounts& o) {
    finite += o.finite;
    nan += o.nan;
    pos_inf += o.pos_inf;
    neg_inf += o.neg_inf;
    masked += o.masked;
    return *this;
  }
};

// Non-finite entries of one tile or tile-sized block by class: the compact per-tile record of
// TileStats (one per tile and stage in every trace), which the CUDA kernels fill from their
// int shared-memory counters. Whole tensors and matrices count in CellCounts.
struct NonfiniteCount {
  int32_t nan = 0, pos_inf = 0, neg_inf = 0;

  int64_t total() const { return int64_t{nan} + pos_inf + neg_inf; }
  NonfiniteCount& operator+=(const NonfiniteCount& o) {
    nan += o.nan;
    pos_inf += o.pos_inf;
    neg_inf += o.neg_inf;
    return *this;
  }
};

// Earliest stage where a non-finite output element appeared (DESIGN §4), one code per element
// of O, LSE, dQ, dK, dV (finite elements: `finite`). Resolved from flags the stages leave per
// query row (RowCause) and per kv tile:
// - Row-indexed outputs O_i, LSE_i, dQ_i take the cause found on query row i, earliest first
//   (row_provenance): `input` (q_i non-finite; any v_j, since 0 * NaN poisons; a visible k_j or
//   bias entry that made a score non-finite; for dQ_i also dO_i and any k_j), `score_overflow`,
//   then for a row whose max m is -inf `mask_fill` (the fill overflowed to -inf) or
//   `fully_masked_row`, then `exp_overflow`, then `grad_overflow` (dP / dS of the row born
//   non-finite). Without a cause O falls back to `propagated`, LSE to `lse`, dQ to
//   `grad_overflow` (an accumulator or its store overflowed).
// - Column-indexed dK_j, dV_j: `input` when k_j or v_j is non-finite, else `propagated` when a
//   poisoned query row (NaN q or dO, a fully masked row, an overflowed score, ...) reached
//   their kv tile through P or dS, else `grad_overflow` (born in their own stages or sums).
enum class Provenance : uint8_t {
  finite = 0,        // the element is finite
  input,             // a q / k / v / dO / bias element it reads is NaN or Inf
  score_overflow,    // a visible score left the precision's range from finite inputs
  mask_fill,         // the mask fill value became -inf (not representable) and emptied the row
  fully_masked_row,  // every score of the row is -inf by masking: m = -inf, l = 0
  exp_overflow,      // an exp argument exceeded log(FLT_MAX) = 88.72 (kExpOverflowArg)
  lse,               // only the LSE is non-finite (e.g. m + log l rounded past fp16's range)
  grad_overflow,     // dP / dS / a gradient accumulator left the range when computed or stored
  propagated,        // came from another non-finite element
};

// Number of Provenance codes (per-code counters are indexed by the code).
constexpr int kProvenanceCodes = static_cast<int>(Provenance::propagated) + 1;

// Cause flags of a query row (b, h, i), OR-ed over its tiles by the CPU recorder and the CUDA
// kernels. The CPU keeps them in one byte per row.
enum RowCause : uint32_t {
  kCauseInput = 1,          // q_i non-finite, or a visible non-finite score read a non-finite
                            // k / bias entry
  kCauseScoreOverflow = 2,  // a visible score became NaN / +inf from finite inputs
  kCauseScoreNegInf = 4,    // a visible score became -inf from finite inputs
  kCauseFillMasked = 8,     // the row holds fill-masked entries and the fill overflowed to -inf
                            // (unfused only: the fused kernels keep the fill in fp32)
  kCauseExpOverflow = 16,   // an exp argument exceeded kExpOverflowArg (or P non-finite)
  kCauseGradOverflow = 32,  // dP / dS became non-finite from finite operands
};
static_assert(kCauseGradOverflow <= 0xff, "row causes fit in the CPU recorder's byte per row");

// Provenance of the non-finite elements of a row-indexed output (O_i, LSE_i, dQ_i), earliest
// cause first (see Provenance): input (the row's flags, or inputs_bad: a non-finite q_i, v, k
// or dO_i the output reads), score overflow, then for an empty row (row_empty: m = -inf) score
// overflow to -inf, an overflowed fill or a fully masked row, then exp overflow, gradient
// overflow; with no cause found, `fallback`.
ATTNSCOPE_HD Provenance row_provenance(uint32_t flags, bool inputs_bad, bool row_empty,
                                       Provenance fallback) {
  if (inputs_bad || (flags & kCauseInput) != 0) return Provenance::input;
  if ((flags & kCauseScoreOverflow) != 0) return Provenance::score_overflow;
  if (row_empty) {
    if ((flags & kCauseScoreNegInf) != 0) return Provenance::score_overflow;
    return (flags & kCauseFillMasked) != 0 ? Provenance::mask_fill : Provenance::fully_masked_row;
  }
  if ((flags & kCauseExpOverflow) != 0) return Provenance::exp_overflow;
  if ((flags & kCauseGradOverflow) != 0) return Provenance::grad_overflow;
  return fallback;
}

// The steps of the fused backward as the stepper walks it (DESIGN §6), named after the stage
// functions of kernels/cpu/backward_stages.h.
enum class StepStage : uint8_t {
  start,  // position 0: nothing ran yet
  backward_preprocess,
  score_tile,
  mask_tile,
  recompute_p,
  accumulate_dv,
  compute_dp,
  compute_ds,
  accumulate_dq,
  accumulate_dk,
  store_dk_dv,  // kv tile j: dK_j, dV_j rounded once and stored (dV_j times 1 / (1 - p) first
                // with dropout: backward_postprocess_dv)
  store_dq,     // backward_postprocess of dQ: the chunk partials summed in order, rounded
};

// A window of the [Sq, Sk] matrices: query rows [row_begin, row_end), keys [col_begin,
// col_end). An end of -1 means Sq / Sk; functions that take one return it resolved
// (resolve_window in kernels/attn_matrices.h).
struct MatrixWindow {
  int64_t row_begin = 0, row_end = -1, col_begin = 0, col_end = -1;

  bool operator==(const MatrixWindow& o) const {
    return row_begin == o.row_begin && row_end == o.row_end && col_begin == o.col_begin &&
           col_end == o.col_end;
  }
  bool operator!=(const MatrixWindow& o) const { return !(*this == o); }
};

}  // namespace attnscope
