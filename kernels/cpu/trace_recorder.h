// Internal recorder behind CpuAttnOptions::trace: the drivers hand it each tile after its
// stages ran (read-only), it fills the CpuTrace's tile stats and per-row / per-kv-tile cause
// flags (RowCause, ColFlag), and at the end resolves provenance codes and norms. Never touches
// kernel outputs.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/attn_trace.h"
#include "kernels/attn_types.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/forward_stages.h"

namespace attnscope::cpu {

// Cause flags of a kv tile (b, kv head, kv tile) for dK / dV.
enum ColFlag : uint8_t {
  kColArrived = 1,  // a non-finite reached the tile's P / dP / dS from a poisoned row or input
  kColBorn = 2,     // a non-finite was born in the tile's dP / dS from finite operands
};

class TraceRecorder {
 public:
  // Resets and sizes the forward (backward = false) or backward half of `trace` for a run of
  // `params` in `mode`; `in` must outlive the recorder (dout set for a backward).
  TraceRecorder(const AttnParams& params, Mode mode, const PreparedInputs& in, bool backward,
                int threads, CpuTrace& trace);

  // Fused forward, after accumulate_pv of tile t: s the masked scores, p the P that went into
  // P V, rounded or not, o keep with dropout (the same non-finite entries: rounding keeps them
  // and 0 * NaN is NaN), m the running row max after the update (tile rows), acc [rows x Dv];
  // s_max: online_softmax_update's, or null.
  void forward_tile(const HeadContext& x, const ScoreTile& t, const float* s, const float* p,
                    const float* m, const float* acc, const BlockMax* s_max = nullptr);
  // Unfused forward, row block t (t.j0 = 0, t.cols = Sk): scores, rounded P, row max m.
  void forward_rows(const HeadContext& x, const ScoreTile& t, const float* s, const float* p,
                    const float* m);
  // A tile the kernel skipped (causally hidden and clean).
  void skipped_tile(const HeadContext& x, const ScoreTile& t);
  void finish_forward(const CpuForwardOutputs& out);

  // Backward, before the main loop reaches rows [i0, i0 + rows) of query head bh = b * H + h:
  // the forward's m and l of those rows and D (null in unfused, where D comes later). The
  // backward blocks of these rows (backward_tile) are exactly rows [i0, i0 + rows).
  void rows_ready(int64_t bh, int64_t i0, int64_t rows, const float* m, const float* l,
                  const float* d);

  // One backward block after compute_ds and the accumulations: fused tile, or an unfused row
  // block (t.cols = Sk, accumulators null). m: the row max P is taken against (tile rows).
  struct BackwardBlock {
    const float* s = nullptr;       // masked scores, like the tile
    const float* p = nullptr;       // fp32 P (unfused: rounded softmax), undropped
    const float* dp = nullptr;      // dP as it enters dS (dropped and scaled with dropout)
    const float* ds = nullptr;      // dS
    const float* m = nullptr;       // [rows]
    const float* l = nullptr;       // [rows] the l P is normalised by
    const float* dq_acc = nullptr;  // [rows x D] fp32 dQ rows of the tile's partial
    const float* dk_acc = nullptr;  // [cols x D] fp32 dK_j
    const float* dv_acc = nullptr;  // [cols x Dv] fp32 dV_j
    // compute_ds's max |dS| when every dp and ds entry is finite (no scan), +inf otherwise.
    float ds_max_abs = std::numeric_limits<float>::infinity();
    int64_t dq_partial = 0;           // fused: the partial (< dq_partials' n) dq_acc belongs to
    const BlockMax* s_max = nullptr;  // fused: recompute_p's maxima of s against m, or null
  };
  // Fused backward, before its first tile: dQ is accumulated into n fp32 partials.
  void dq_partials(int64_t n);
  void backward_tile(const HeadContext& x, const ScoreTile& t, const BackwardBlock& blk);
  void finish_backward(const CpuBackwardOutputs& out);

 private:
  TileStats& tile(bool backward, const HeadContext& x, int64_t qt, int64_t kt);
  void set_row(int64_t row, uint8_t flags);
  void set_col(int64_t col, uint8_t flags);
  bool bias_row_bad(const HeadContext& x, const ScoreTile& t, int64_t r) const;
  // Visible-score stats of one kv tile t into ts and the row flags; m: row max per tile row;
  // known: finite_block_max of s against m if a stage computed it and every m is finite (null:
  // not). Returns true when no score is masked by a mask or bias and every visible one is
  // finite without an exp overflow (a causally masked score holds the fill, which m bounds:
  // its exp is 0 or at most 1).
  bool scan_scores(const HeadContext& x, const ScoreTile& t, const float* s, const float* m,
                   TileStats& ts, const BlockMax* known = nullptr);
  // Whether a row's P = exp(S - m) / l is finite without looking, given clean scores: finite m
  // with l >= 1 (l null: the unnormalised forward P), or a safe empty row.
  bool p_row_finite(float m, const float* l) const;
  // Non-finite counts of the fused accumulators after tile t's update into ts (p_finite: P is
  // known finite), scanning only those the running bounds do not prove finite.
  void count_accumulators(const HeadContext& x, const ScoreTile& t, const BackwardBlock& blk,
                          bool p_finite, TileStats& ts);
  // Where P / dP / dS of kv tile t went non-finite: row and kv-tile cause flags.
  void classify_gradients(const HeadContext& x, const ScoreTile& t, const BackwardBlock& blk);
  Provenance row_cause(int64_t bh, int64_t i, bool backward) const;

  const AttnParams& prm_;
  const PreparedInputs& in_;
  const int threads_;
  CpuTrace& trace_;
  const bool backward_;
  bool fill_overflowed_ = false;  // the mask fill is -inf only because it is not representable
  bool safe_ = false;
  int64_t n_q_ = 0, n_kv_ = 0;
  std::vector<uint8_t> q_bad_, dout_bad_;  // [B * H * Sq] row has a non-finite q / dO
  // Largest |q|, |dO| of each head [B * H] and |k| of each K tile [B * Hk * n_kv]; +inf where
  // some entry is non-finite (a K tile "has a non-finite" exactly then).
  std::vector<float> q_head_max_, dout_head_max_, k_tile_max_;
  std::vector<uint8_t> k_head_bad_;    // [B * Hk] K of the kv head has a non-finite
  std::vector<uint8_t> v_head_bad_;    // [B * Hk] V of the kv head has a non-finite
  std::vector<uint8_t> v_head_large_;  // [B * Hk] Sk * max |v| could overflow an fp32 sum
  std::vector<uint8_t> row_flags_;     // [B * H * Sq] RowCause bits
  std::vector<uint8_t> col_flags_;     // [B * Hk * n_kv] ColFlag bits
  std::vector<uint8_t> row_clean_;     // [B * H * Sq] backward: q, dO, m, l (D) usable
  std::vector<float> row_m_;           // [B * H * Sq] backward: m of the row
  // [B * H * Sq] backward, at the first row of each rows_ready block: every m of the block is
  // finite; every row's P is finite from clean scores (p_row_finite).
  std::vector<uint8_t> block_m_finite_, block_p_finite_;
  // Fused backward: bounds on the magnitude of every entry of dK_j, dV_j [B * Hk * n_kv] and of
  // the dQ partials' rows [partials][B * H * n_q] so far (+inf: not finite, or unknown).
  std::vector<double> dk_bound_, dv_bound_, dq_bound_;
};

}  // namespace attnscope::cpu
