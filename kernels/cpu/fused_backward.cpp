// Driver of the tiled FlashAttention-2 backward on CPU. Work items are (batch, kv head, chunk
// of kv tiles): a chunk owns dK_j and dV_j of its tiles outright (summed over the query heads
// of the group) and adds dQ into its own fp32 partial; the partials are then summed in chunk
// order. The chunking depends only on the shape, so results are bit-identical for any number
// of threads. The groups run in waves, which bound what is held per query head (bf16 pairs of
// Q and dO, the extra dQ partials) to one wave's heads.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attn_check.h"
#include "kernels/cpu/backward_stages.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/pooled_cells.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_recorder.h"

namespace attnscope::cpu {
namespace {

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

// Per-worker buffers: the tile intermediates plus K_j^T and V_j^T (B of S and dP) in fp32, or
// with bf16_dot as pairs (gemm_bf16.h) with those of K_j (B of dQ).
struct BackwardScratch {
  BackwardTileBuffers tile;
  std::vector<float> kt, vt;                     // [D, Bc], [Dv, Bc]; empty with bf16_dot
  Buffer<uint32_t> kt_pairs, vt_pairs, k_pairs;  // pair_columns of K_j^T, V_j^T, K_j

  BackwardScratch(int64_t dim, int64_t dim_v, bool paired)
      : kt(count(paired ? 0 : dim * kTileCols)), vt(count(paired ? 0 : dim_v * kTileCols)) {}
};

class FusedBackward {
 public:
  FusedBackward(const AttnParams& prm, const PreparedInputs& in, const CpuForwardView& fwd,
                int threads, const CpuBackwardOutputs& out, TraceRecorder* rec, PooledCells* pooled,
                const CancelPoll& cancel)
      : prm_(prm),
        in_(in),
        fwd_(fwd),
        out_(out),
        threads_(threads),
        rec_(rec),
        pooled_(pooled),
        cancel_(cancel),
        x0_(make_head_context(prm, Mode::fused, 0, 0)) {}

  // The (batch, kv head) groups go in waves of wave_groups(): the bf16 pairs of Q and dO and
  // the extra dQ partials are held for one wave's query heads, not for the whole tensor.
  void run() {
    preprocess();
    kv_clean_ = finite_kv_tiles(prm_, in_);
    const int64_t dq_elements = prm_.batch * prm_.heads * prm_.seqlen_q * prm_.head_dim;
    chunks_ = kv_chunks(prm_.batch * prm_.kv_heads, n_kv_, dq_elements);
    if (rec_ != nullptr) rec_->dq_partials(chunks_);
    // Chunk 0 accumulates straight into out.dq; chunks 1.. into the wave's dq_extra_.
    std::fill(out_.dq, out_.dq + dq_elements, 0.0f);
    std::vector<BackwardScratch> scratch(count(threads_),
                                         {prm_.head_dim, prm_.head_dim_v, paired_});
    const int64_t groups = prm_.batch * prm_.kv_heads, per_wave = wave_groups();
    for (int64_t g0 = 0; g0 < groups; g0 += per_wave) {
      wave_ = Wave{g0, std::min(groups, g0 + per_wave)};
      pair_wave();
      const int64_t G = prm_.group_size();
      const int64_t partial = (wave_.g1 - g0) * G * prm_.seqlen_q * prm_.head_dim;
      dq_extra_.resize(count((chunks_ - 1) * partial));
      std::fill(dq_extra_.begin(), dq_extra_.end(), 0.0f);
      parallel_for((wave_.g1 - g0) * chunks_, threads_, [&](int64_t item, int worker) {
        const int64_t bkv = g0 + item / chunks_, chunk = item % chunks_;
        // dQ rows of the wave's query heads, indexed from the wave's first row.
        float* dq_acc = chunk == 0 ? out_.dq + wave_row0() * prm_.head_dim
                                   : dq_extra_.data() + (chunk - 1) * partial;
        for (int64_t jt = chunk; jt < n_kv_; jt += chunks_) {
          kv_tile(bkv, jt, dq_acc, scratch[count(worker)], worker);
        }
      });
      reduce_dq(partial);
    }
  }

 private:
  // Groups [g0, g1) of (batch, kv head): query heads [g0 * G, g1 * G) of the flat B * H.
  struct Wave {
    int64_t g0 = 0, g1 = 0;
  };

  // Groups per wave: enough for two work items per worker (the chunks of one group differ by a
  // kv tile's share of causal work, so one item each would leave a worker idle at every wave's
  // end).
  int64_t wave_groups() const { return tile_count(2 * int64_t{threads_}, chunks_); }
  // The first row of the wave in [B * H * Sq].
  int64_t wave_row0() const { return wave_.g0 * prm_.group_size() * prm_.seqlen_q; }

  // D = rowsum(dO * O) per q tile and whether the tile is clean (q_tile_clean).
  void preprocess() {
    const int64_t Sq = prm_.seqlen_q, Dv = prm_.head_dim_v;
    const int64_t q_tiles = prm_.batch * prm_.heads * n_q_;
    q_clean_.assign(count(q_tiles), 0);
    parallel_for(q_tiles, threads_, [&](int64_t item, int) {
      cancel_.check();
      const int64_t i0 = (item % n_q_) * kTileRows, rows = std::min(kTileRows, Sq - i0);
      const int64_t row = (item / n_q_) * Sq + i0;
      backward_preprocess(x0_, rows, fwd_.o + row * Dv, in_.dout + row * Dv, out_.d + row);
      const bool inputs_finite =
          rows_finite(in_.q_max, row, rows) && rows_finite(in_.dout_max, row, rows);
      q_clean_[count(item)] =
          q_tile_clean(x0_, rows, inputs_finite, out_.d + row, fwd_.m + row, fwd_.l + row);
      if (rec_ != nullptr) {
        rec_->rows_ready(item / n_q_, i0, rows, fwd_.m + row, fwd_.l + row, out_.d + row);
      }
    });
  }

  // With bf16_dot, the pairs of Q and dO of the wave's query heads that every kv tile's
  // matmuls read.
  void pair_wave() {
    if (!paired_) return;
    const int64_t Sq = prm_.seqlen_q, D = prm_.head_dim, Dv = prm_.head_dim_v;
    const int64_t G = prm_.group_size(), tile0 = wave_.g0 * G * n_q_;
    const int64_t q_tiles = (wave_.g1 - wave_.g0) * G * n_q_;
    q_rows_.resize(count(q_tiles * kTileRows * q_row_words_));
    do_rows_.resize(count(q_tiles * kTileRows * do_row_words_));
    q_cols_.resize(count(q_tiles * q_cols_block_));
    do_cols_.resize(count(q_tiles * do_cols_block_));
    parallel_for(q_tiles, threads_, [&](int64_t item, int) {
      cancel_.check();
      const int64_t i0 = ((tile0 + item) % n_q_) * kTileRows, rows = std::min(kTileRows, Sq - i0);
      const int64_t row = ((tile0 + item) / n_q_) * Sq + i0, at = row - wave_row0();
      pair_rows(rows, D, in_.q + row * D, D, q_rows_.data() + at * q_row_words_);
      pair_rows(rows, Dv, in_.dout + row * Dv, Dv, do_rows_.data() + at * do_row_words_);
      pair_columns(rows, D, in_.q + row * D, D, q_cols_.data() + item * q_cols_block_);
      pair_columns(rows, Dv, in_.dout + row * Dv, Dv, do_cols_.data() + item * do_cols_block_);
    });
  }

  // Main loop body for kv tile jt of (batch, kv head) bkv: every q tile of every query head of
  // the group, then dK_j and dV_j stored once. Tiles of the pooled head go to pooled_ too.
  void kv_tile(int64_t bkv, int64_t jt, float* dq_acc, BackwardScratch& w, int worker) const {
    const int64_t Sq = prm_.seqlen_q, Sk = prm_.seqlen_k, D = prm_.head_dim, Dv = prm_.head_dim_v;
    const int64_t G = prm_.group_size(), b = bkv / prm_.kv_heads, kvh = bkv % prm_.kv_heads;
    const int64_t j0 = jt * kTileCols, cols = std::min(kTileCols, Sk - j0);
    const float* k_tile = in_.k + (bkv * Sk + j0) * D;
    const float* v_tile = in_.v + (bkv * Sk + j0) * Dv;
    if (paired_) {
      // The forward's layouts of paired kv tiles: K^T and V^T as its K^T, K as its V.
      w.kt_pairs.resize(count(kt_pairs_block(D)));
      w.vt_pairs.resize(count(kt_pairs_block(Dv)));
      w.k_pairs.resize(count(v_pairs_block(D)));
      pair_rows_transposed(cols, D, k_tile, D, kTileCols, w.kt_pairs.data());
      pair_rows_transposed(cols, Dv, v_tile, Dv, kTileCols, w.vt_pairs.data());
      pair_columns(cols, D, k_tile, D, w.k_pairs.data());
    } else {
      transpose(cols, D, k_tile, D, w.kt.data(), kTileCols);
      transpose(cols, Dv, v_tile, Dv, w.vt.data(), kTileCols);
    }
    // dK_j and dV_j sum in fp32 in their own output rows (one worker per kv tile), rounded there
    // at the end.
    float* const dk = out_.dk + (bkv * Sk + j0) * D;
    float* const dv = out_.dv + (bkv * Sk + j0) * Dv;
    std::fill(dk, dk + cols * D, 0.0f);
    std::fill(dv, dv + cols * Dv, 0.0f);
    const bool kv_clean = kv_clean_[count(bkv * n_kv_ + jt)];
    BackwardTileBuffers& tb = w.tile;
    for (int64_t h = kvh * G; h < (kvh + 1) * G; ++h) {
      const int64_t bh = b * prm_.heads + h;
      const HeadContext x = make_head_context(prm_, Mode::fused, b, h);
      for (int64_t qt = 0; qt < n_q_; ++qt) {
        cancel_.check();
        const int64_t i0 = qt * kTileRows, row = bh * Sq + i0;
        const ScoreTile t{i0, j0, std::min(kTileRows, Sq - i0), cols, kTileCols};
        const float* q_tile = in_.q + row * D;
        const float* do_tile = in_.dout + row * Dv;
        const bool pool = pooled_ != nullptr && bh == pooled_bh_ && pooled_->overlaps(t);
        const bool skip = backward_skips(x, t, kv_clean, q_clean_[count(bh * n_q_ + qt)]);
        if (skip && rec_ != nullptr) rec_->skipped_tile(x, t);
        if (skip && !pool) continue;
        // The tile's place among the wave's q tiles and rows (pairs, dQ accumulators).
        const int64_t item = bh * n_q_ + qt - wave_.g0 * G * n_q_, at = row - wave_row0();
        const auto pairs = [&](const Buffer<uint32_t>& v, int64_t offset) {
          return paired_ ? v.data() + offset : nullptr;
        };
        const Bf16Pairs s_pairs{pairs(q_rows_, at * q_row_words_), q_row_words_, 1,
                                pairs(w.kt_pairs, 0), kTileCols};
        const Bf16Pairs dp_pairs{pairs(do_rows_, at * do_row_words_), do_row_words_, 1,
                                 pairs(w.vt_pairs, 0), kTileCols};
        BlockMax s_max;  // of S against m, for the trace
        fused_backward_intermediates(x, t, q_tile, paired_ ? nullptr : w.kt.data(), do_tile,
                                     paired_ ? nullptr : w.vt.data(), fwd_.m + row, fwd_.l + row,
                                     out_.d + row, tb, TileStage::ds, s_pairs, dp_pairs,
                                     rec_ != nullptr ? &s_max : nullptr);
        if (pool) pooled_->add({t, tb.s.data(), tb.p.data(), tb.dp.data(), tb.ds.data()}, worker);
        if (skip) continue;
        accumulate_dv(x, t, tb.p.data(), tb.p_lo.data(), do_tile, dv,
                      {nullptr, 0, 0, pairs(do_cols_, item * do_cols_block_), paired_ld(Dv)});
        accumulate_dq(x, t, tb.ds.data(), k_tile, dq_acc + at * D,
                      {nullptr, 0, 0, pairs(w.k_pairs, 0), paired_ld(D)});
        accumulate_dk(x, t, tb.ds.data(), q_tile, dk,
                      {nullptr, 0, 0, pairs(q_cols_, item * q_cols_block_), paired_ld(D)});
        if (rec_ != nullptr) {
          rec_->backward_tile(
              x, t,
              {tb.s.data(), tb.p.data(), tb.dp.data(), tb.ds.data(), fwd_.m + row, fwd_.l + row,
               dq_acc + at * D, dk, dv, tb.ds_max_abs, jt % chunks_, &s_max});
        }
      }
    }
    backward_postprocess(x0_, dk, cols * D, dk);
    backward_postprocess_dv(x0_, dv, cols * Dv, dv);
  }

  // dQ = round(partial_0 + partial_1 + ...), summed in chunk order, per q tile of the wave;
  // `partial` elements per extra partial.
  void reduce_dq(int64_t partial) {
    const int64_t D = prm_.head_dim, Sq = prm_.seqlen_q, G = prm_.group_size();
    const int64_t tile0 = wave_.g0 * G * n_q_;
    parallel_for((wave_.g1 - wave_.g0) * G * n_q_, threads_, [&](int64_t item, int) {
      const int64_t i0 = ((tile0 + item) % n_q_) * kTileRows;
      const int64_t at = (((tile0 + item) / n_q_) * Sq + i0 - wave_row0()) * D;
      const int64_t n = std::min(kTileRows, Sq - i0) * D;
      float* acc = out_.dq + wave_row0() * D + at;
      for (int64_t c = 1; c < chunks_; ++c) {
        const float* part = dq_extra_.data() + (c - 1) * partial + at;
        for (int64_t e = 0; e < n; ++e) acc[e] += part[e];
      }
      backward_postprocess(x0_, acc, n, acc);
    });
  }

  const AttnParams& prm_;
  const PreparedInputs& in_;
  const CpuForwardView& fwd_;
  const CpuBackwardOutputs& out_;
  const int threads_;
  TraceRecorder* const rec_;
  PooledCells* const pooled_;
  const CancelPoll& cancel_;
  const int64_t pooled_bh_ =
      pooled_ != nullptr ? pooled_->head().b * prm_.heads + pooled_->head().h : -1;
  const HeadContext x0_;  // precision and fill policy (shared by every head)
  const int64_t n_q_ = tile_count(prm_.seqlen_q, kTileRows);
  const int64_t n_kv_ = tile_count(prm_.seqlen_k, kTileCols);
  int64_t chunks_ = 1;
  Wave wave_;
  std::vector<uint8_t> q_clean_, kv_clean_;  // [B * H][n_q], [B * Hk][n_kv]
  Buffer<float> dq_extra_;                   // [chunks - 1][the wave's rows, D]
  // bf16_dot: Q and dO of the wave's query heads paired (gemm_bf16.h) as A of S and dP
  // (pair_rows, row by row) and as B of dK and dV (pair_columns, q tile by q tile); empty
  // otherwise.
  const bool paired_ = x0_.bf16_dot;
  const int64_t q_row_words_ = (prm_.head_dim + 1) / 2, do_row_words_ = (prm_.head_dim_v + 1) / 2;
  const int64_t q_cols_block_ = kTileRows / 2 * paired_ld(prm_.head_dim);
  const int64_t do_cols_block_ = kTileRows / 2 * paired_ld(prm_.head_dim_v);
  Buffer<uint32_t> q_rows_, do_rows_;  // [the wave's rows][q_row_words_ / do_row_words_]
  Buffer<uint32_t> q_cols_, do_cols_;  // [the wave's q tiles][q_cols_block_ / do_cols_block_]
};

}  // namespace

// Enough items for up to 16 workers, at most the number of kv tiles, and at most 512 MiB of
// extra dQ partials for the whole tensor (a wave holds a share of that). Chunk c holds kv tiles c,
// c + chunks, ... (round robin, which balances causal masking).
int64_t kv_chunks(int64_t kv_groups, int64_t n_kv, int64_t dq_elements) {
  constexpr int64_t kTargetItems = 16;
  constexpr int64_t kPartialBudget = int64_t{512} << 20;
  const int64_t by_items = tile_count(kTargetItems, kv_groups);
  const int64_t by_memory = 1 + kPartialBudget / (dq_elements * int64_t{sizeof(float)});
  return std::max<int64_t>(1, std::min({by_items, n_kv, by_memory}));
}

BackwardTileBuffers::BackwardTileBuffers() {
  for (std::vector<float>* buf : {&s, &gf, &p, &p_lo, &dp, &ds}) {
    buf->resize(count(kTileRows * kTileCols));
  }
}

void fused_backward_intermediates(const HeadContext& x, const ScoreTile& t, const float* q_tile,
                                  const float* kt, const float* do_tile, const float* vt,
                                  const float* m, const float* l, const float* d,
                                  BackwardTileBuffers& w, TileStage last, const Bf16Pairs& s_paired,
                                  const Bf16Pairs& dp_paired, BlockMax* s_max) {
  ATTNSCOPE_DCHECK(x.params != nullptr && fused_tile(*x.params, t));
  ATTNSCOPE_DCHECK(w.s.size() >= static_cast<size_t>(kTileRows * kTileCols));
  score_tile(x, t, q_tile, kt, kTileCols, w.s.data(), w.gf.data(), s_paired);
  mask_tile(x, t, w.s.data(), w.gf.data());
  if (last >= TileStage::p) recompute_p(x, t, w.s.data(), m, l, w.p.data(), s_max);
  if (last >= TileStage::dp) compute_dp(x, t, do_tile, vt, kTileCols, w.dp.data(), dp_paired);
  w.ds_max_abs = last >= TileStage::ds
                     ? compute_ds(x, t, w.p.data(), w.dp.data(), d, w.gf.data(), w.ds.data())
                     : std::numeric_limits<float>::infinity();
}

// A causally hidden tile may be skipped only when every row's P there is exactly 0 (finite m
// and l, or a safe empty row) and no NaN/Inf in q, dO, D, K or V could turn 0 products into NaN.
bool q_tile_clean(const HeadContext& x, int64_t rows, bool inputs_finite, const float* d,
                  const float* m, const float* l) {
  bool clean = inputs_finite && all_finite(d, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const bool safe_empty = x.safe && m[r] == -std::numeric_limits<float>::infinity();
    clean &= safe_empty || (std::isfinite(m[r]) && std::isfinite(l[r]));
  }
  return clean;
}

bool backward_skips(const HeadContext& x, const ScoreTile& t, bool kv_clean, bool q_clean) {
  return causally_hidden(*x.params, t) && fill_is_neg_inf(x) && kv_clean && q_clean;
}

void fused_backward(const AttnParams& prm, const PreparedInputs& in, const CpuForwardView& fwd,
                    int threads, const CpuBackwardOutputs& out, TraceRecorder* rec,
                    PooledCells* pooled, const CancelPoll& cancel) {
  FusedBackward(prm, in, fwd, threads, out, rec, pooled, cancel).run();
}

}  // namespace attnscope::cpu
