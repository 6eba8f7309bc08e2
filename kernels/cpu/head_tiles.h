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
  std::vector<float> kt, vt;       // K^T, V^T in the transpose_kv_tiles layout (one head)
  std::vector<uint8_t> kv_finite;  // [n_kv] finite_kv_tiles of the kv head
};

HeadOperands head_operands(const AttnParams& params, Mode mode, const CpuAttnInputs& inputs,
                           int64_t b, int64_t h);

// The window with -1 ends resolved; throws std::invalid_argument when empty or out of range.
MatrixWindow resolve_window(const AttnParams& params, MatrixWindow window);

// The last stage a selection needs (throws when nothing is selected).
TileStage last_stage(const MatrixSelection& which);

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
            TileStage last);
  // `last`: the last intermediate needed (TileStage). From P on, the forward's m and l (and for
  // dS, D = rowsum(dO * O)) are recomputed per q tile with the fused forward's own stages.

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

  const HeadOperands& operands() const { return op_; }
  Mode mode() const { return mode_; }

 private:
  void fused_q_tile(int64_t qt, int64_t col_begin, int64_t col_end, Scratch& w,
                    const std::function<void(const TileBlock&)>& fn) const;
  void unfused_q_tile(int64_t qt, Scratch& w,
                      const std::function<void(const TileBlock&)>& fn) const;

  const Mode mode_;
  const TileStage last_;
  HeadOperands op_;
};

}  // namespace attnscope::cpu
