// Driver of the tiled FlashAttention-2 backward on CPU. Work items are (batch, kv head, chunk
// of kv tiles): a chunk owns dK_j and dV_j of its tiles outright (summed over the query heads
// of the group) and adds dQ into its own fp32 partial; the partials are then summed in chunk
// order. The chunking depends only on the shape, so results are bit-identical for any number
// of threads.
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

// Per-worker buffers: the tile intermediates plus K_j^T, V_j^T and the fp32 dK_j, dV_j.
struct BackwardScratch {
  BackwardTileBuffers tile;
  std::vector<float> kt, vt;  // [D, Bc], [Dv, Bc]
  std::vector<float> dk, dv;  // [Bc, D], [Bc, Dv]

  BackwardScratch(int64_t dim, int64_t dim_v)
      : kt(count(dim * kTileCols)),
        vt(count(dim_v * kTileCols)),
        dk(count(kTileCols * dim)),
        dv(count(kTileCols * dim_v)) {}
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

  void run() {
    preprocess();
    kv_clean_ = finite_kv_tiles(prm_, in_, threads_);
    const int64_t dq_elements = prm_.batch * prm_.heads * prm_.seqlen_q * prm_.head_dim;
    chunks_ = kv_chunks(prm_.batch * prm_.kv_heads, n_kv_, dq_elements);
    // Chunk 0 accumulates straight into out.dq; chunks 1.. into dq_extra_.
    std::fill(out_.dq, out_.dq + dq_elements, 0.0f);
    dq_extra_.assign(count((chunks_ - 1) * dq_elements), 0.0f);
    std::vector<BackwardScratch> scratch(count(threads_), {prm_.head_dim, prm_.head_dim_v});
    parallel_for(prm_.batch * prm_.kv_heads * chunks_, threads_, [&](int64_t item, int worker) {
      const int64_t bkv = item / chunks_, chunk = item % chunks_;
      float* dq_acc = chunk == 0 ? out_.dq : dq_extra_.data() + (chunk - 1) * dq_elements;
      for (int64_t jt = chunk; jt < n_kv_; jt += chunks_) {
        kv_tile(bkv, jt, dq_acc, scratch[count(worker)], worker);
      }
    });
    reduce_dq(dq_elements);
  }

 private:
  // D = rowsum(dO * O) per q tile, and whether the tile is clean (q_tile_clean).
  void preprocess() {
    const int64_t Sq = prm_.seqlen_q, D = prm_.head_dim, Dv = prm_.head_dim_v;
    q_clean_.assign(count(prm_.batch * prm_.heads * n_q_), 0);
    parallel_for(prm_.batch * prm_.heads * n_q_, threads_, [&](int64_t item, int) {
      cancel_.check();
      const int64_t i0 = (item % n_q_) * kTileRows, rows = std::min(kTileRows, Sq - i0);
      const int64_t row = (item / n_q_) * Sq + i0;
      backward_preprocess(rows, Dv, fwd_.o + row * Dv, in_.dout + row * Dv, out_.d + row);
      q_clean_[count(item)] = q_tile_clean(x0_, rows, in_.q + row * D, in_.dout + row * Dv,
                                           out_.d + row, fwd_.m + row, fwd_.l + row);
      if (rec_ != nullptr) {
        rec_->rows_ready(item / n_q_, i0, rows, fwd_.m + row, fwd_.l + row, out_.d + row);
      }
    });
  }

  // Main loop body for kv tile jt of (batch, kv head) bkv: every q tile of every query head of
  // the group, then dK_j and dV_j stored once. Tiles of the pooled head go to pooled_ too.
  void kv_tile(int64_t bkv, int64_t jt, float* dq_acc, BackwardScratch& w, int worker) const {
    const int64_t Sq = prm_.seqlen_q, Sk = prm_.seqlen_k, D = prm_.head_dim, Dv = prm_.head_dim_v;
    const int64_t G = prm_.group_size(), b = bkv / prm_.kv_heads, kvh = bkv % prm_.kv_heads;
    const int64_t j0 = jt * kTileCols, cols = std::min(kTileCols, Sk - j0);
    const float* k_tile = in_.k + (bkv * Sk + j0) * D;
    transpose(cols, D, k_tile, D, w.kt.data(), kTileCols);
    transpose(cols, Dv, in_.v + (bkv * Sk + j0) * Dv, Dv, w.vt.data(), kTileCols);
    std::fill(w.dk.begin(), w.dk.end(), 0.0f);
    std::fill(w.dv.begin(), w.dv.end(), 0.0f);
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
        fused_backward_intermediates(x, t, q_tile, w.kt.data(), do_tile, w.vt.data(), fwd_.m + row,
                                     fwd_.l + row, out_.d + row, tb);
        if (pool) pooled_->add({t, tb.s.data(), tb.p.data(), tb.dp.data(), tb.ds.data()}, worker);
        if (skip) continue;
        accumulate_dv(x, t, tb.p.data(), tb.p_lo.data(), do_tile, w.dv.data());
        accumulate_dq(x, t, tb.ds.data(), k_tile, dq_acc + row * D);
        accumulate_dk(x, t, tb.ds.data(), q_tile, w.dk.data());
        if (rec_ != nullptr) {
          rec_->backward_tile(x, t,
                              {tb.s.data(), tb.p.data(), tb.dp.data(), tb.ds.data(), fwd_.m + row,
                               fwd_.l + row, dq_acc + row * D, w.dk.data(), w.dv.data()});
        }
      }
    }
    backward_postprocess(x0_, w.dk.data(), cols * D, out_.dk + (bkv * Sk + j0) * D);
    backward_postprocess_dv(x0_, w.dv.data(), cols * Dv, out_.dv + (bkv * Sk + j0) * Dv);
  }

  // dQ = round(partial_0 + partial_1 + ...), summed in chunk order, per q tile.
  void reduce_dq(int64_t dq_elements) {
    const int64_t D = prm_.head_dim, Sq = prm_.seqlen_q;
    parallel_for(prm_.batch * prm_.heads * n_q_, threads_, [&](int64_t item, int) {
      const int64_t i0 = (item % n_q_) * kTileRows;
      const int64_t begin = ((item / n_q_) * Sq + i0) * D;
      const int64_t n = std::min(kTileRows, Sq - i0) * D;
      float* acc = out_.dq + begin;
      for (int64_t c = 1; c < chunks_; ++c) {
        const float* part = dq_extra_.data() + (c - 1) * dq_elements + begin;
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
  std::vector<uint8_t> q_clean_, kv_clean_;  // [B * H][n_q], [B * Hk][n_kv]
  std::vector<float> dq_extra_;              // [chunks - 1][B, H, Sq, D]
};

}  // namespace

// Enough items for up to 16 workers, at most the number of kv tiles, and at most 512 MiB of
// extra dQ partials. Chunk c holds kv tiles c, c + chunks, ... (round robin, which balances
// causal masking).
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
                                  BackwardTileBuffers& w, TileStage last) {
  ATTNSCOPE_DCHECK(x.params != nullptr && fused_tile(*x.params, t));
  ATTNSCOPE_DCHECK(w.s.size() >= static_cast<size_t>(kTileRows * kTileCols));
  score_tile(x, t, q_tile, kt, kTileCols, w.s.data(), w.gf.data());
  mask_tile(x, t, w.s.data(), w.gf.data());
  if (last >= TileStage::p) recompute_p(x, t, w.s.data(), m, l, w.p.data());
  if (last >= TileStage::dp) compute_dp(x, t, do_tile, vt, kTileCols, w.dp.data());
  if (last >= TileStage::ds) compute_ds(x, t, w.p.data(), w.dp.data(), d, w.gf.data(), w.ds.data());
}

// A causally hidden tile may be skipped only when every row's P there is exactly 0 (finite m
// and l, or a safe empty row) and no NaN/Inf in q, dO, D, K or V could turn 0 products into NaN.
bool q_tile_clean(const HeadContext& x, int64_t rows, const float* q, const float* dout,
                  const float* d, const float* m, const float* l) {
  bool clean =
      all_finite(q, rows * x.dim) && all_finite(dout, rows * x.dim_v) && all_finite(d, rows);
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
