// Recomputation of one (batch, head)'s score-shaped intermediates S, P, dP, dS q tile by q
// tile, with the very stage functions (and operand layouts) of the emulated kernel, so every
// value matches what the kernel used bit for bit. Feeds the full-resolution and pooled
// matrices; the operands also serve the backward stepper.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/forward_stages.h"
#include "kernels/cpu/head_matrices.h"

namespace attnscope::cpu {

// The operands of one (b, h), rounded to the emulated precision as prepare_inputs does.
struct HeadOperands {
  HeadContext x;
  int64_t n_q = 0, n_kv = 0;
  std::vector<float> q, dout;      // [Sq x D], [Sq x Dv] (dout all ones when absent)
  std::vector<float> k, v;         // [Sk x D], [Sk x Dv] of kv head h / (H / Hk)
  Buffer<float> kt, vt;            // K^T, V^T in the transpose_kv_tiles layout (one head)
  std::vector<uint8_t> kv_finite;  // [n_kv] finite_kv_tiles of the kv head
};

HeadOperands head_operands(const AttnParams& params, Mode mode, const CpuAttnInputs& inputs,
                           int64_t b, int64_t h);

// The last stage a selection needs (throws when nothing is selected).
TileStage last_stage(const MatrixSelection& which);

// The operands HeadTiles needs for its last stage: views of the caller's arrays when the
// emulated precision is f32, else rounded copies; only those the stages up to `last` read
// (q, kt always; v, dout, vt from dP on), so a pooled S or P holds one K^T copy at most.
struct TileOperands {
  HeadContext x;
  int64_t n_q = 0, n_kv = 0;
  const float* q = nullptr;        // [Sq x D]
  const float* v = nullptr;        // [Sk x Dv] (null before dS)
  const float* dout = nullptr;     // [Sq x Dv] (null before dP; all ones when absent)
  Buffer<float> kt, vt;            // transpose_kv_tiles layout of K (always) and V (from dP on)
  std::vector<uint8_t> kv_finite;  // [n_kv] finite_kv_tiles of the kv head (rounded K and V)
  std::vector<float> q_copy, v_copy, dout_copy;  // owners of q / v / dout when rounded
};

// One block of recomputed intermediates: query rows t.i0.., keys t.j0.. (absolute indices);
// matrices at the block's (0, 0) with row stride t.ld; null past `last`.
struct TileBlock {
  ScoreTile t;
  const float* s = nullptr;
  const float* p = nullptr;
  const float* dp = nullptr;
  const float* ds = nullptr;
};

class HeadTiles {
 public:
  HeadTiles(const AttnParams& params, Mode mode, const CpuAttnInputs& inputs, int64_t b, int64_t h,
            TileStage last, const ForwardRows* rows = nullptr);
  // `last`: the last intermediate needed (TileStage). From P on, the forward's m and l are
  // recomputed per q tile by the forward's statistics pass (fused_forward_q_tile without O, so
  // bit for bit the forward's); for dS the full forward runs for
  // D = rowsum(dO * O). Fused with `rows`: m, l and D are read from there instead.

  // Per-worker buffers.
  struct Scratch {
    Scratch(const HeadTiles& tiles);
    ForwardScratch fwd;
    BackwardTileBuffers tile;
    std::vector<float> o, lse, m, l, d;   // the q tile's forward rows: [Br x Dv], [Br] ...
    std::vector<float> s, gf, p, dp, ds;  // unfused row block [Br x Sk]
  };

  // Recomputes q tile qt and calls fn once per block overlapping keys [col_begin, col_end):
  // fused, one block per kv tile (Br x Bc, the kernel's tiles); unfused, one block of all Sk
  // keys (the kernel's row block).
  void q_tile(int64_t qt, int64_t col_begin, int64_t col_end, Scratch& w,
              const std::function<void(const TileBlock&)>& fn) const;

  const TileOperands& operands() const { return op_; }
  Mode mode() const { return mode_; }

 private:
  void fused_q_tile(int64_t qt, int64_t col_begin, int64_t col_end, Scratch& w,
                    const std::function<void(const TileBlock&)>& fn) const;
  void unfused_q_tile(int64_t qt, Scratch& w,
                      const std::function<void(const TileBlock&)>& fn) const;
  // The forward's m, l of q tile qt into w.m, w.l (rows from qt * Br).
  void forward_stats(int64_t qt, Scratch& w) const;

  const Mode mode_;
  const TileStage last_;
  TileOperands op_;
  // The caller's forward rows of this head ([Sq] each), or null: recompute them.
  const float* row_m_ = nullptr;
  const float* row_l_ = nullptr;
  const float* row_d_ = nullptr;
};

}  // namespace attnscope::cpu
