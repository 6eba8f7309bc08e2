// Driver of the tiled FlashAttention-2 forward on CPU: one work item per (batch, head, q tile),
// walking the kv tiles through the forward stages.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/attn_check.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/forward_stages.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/pooled_cells.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_recorder.h"

namespace attnscope::cpu {

ForwardScratch::ForwardScratch(int64_t dim_v)
    : s(static_cast<size_t>(kTileRows * kTileCols)),
      p(s.size()),
      m(static_cast<size_t>(kTileRows)),
      l(m.size()),
      acc(static_cast<size_t>(kTileRows * dim_v)) {}

void fused_forward_q_tile(const HeadContext& x, int64_t qt, const FusedHeadOperands& op,
                          ForwardScratch& w, float* o, float* lse, float* m, float* l,
                          TraceRecorder* rec, const CancelPoll& cancel, PooledCells* pooled,
                          int worker) {
  const AttnParams& prm = *x.params;
  const int64_t Sq = prm.seqlen_q, Sk = prm.seqlen_k, D = prm.head_dim, Dv = prm.head_dim_v;
  const int64_t n_kv = tile_count(Sk, kTileCols);
  const int64_t i0 = qt * kTileRows, rows = std::min(kTileRows, Sq - i0);
  ATTNSCOPE_DCHECK(qt >= 0 && i0 < Sq);
  const bool stats_only = o == nullptr;  // P V left out: it feeds neither m nor l
  ATTNSCOPE_DCHECK(op.q != nullptr && (op.kt != nullptr || op.kt_pairs != nullptr) &&
                   op.kv_finite != nullptr && (op.v != nullptr || stats_only) &&
                   (rec == nullptr || !stats_only));
  ATTNSCOPE_DCHECK(w.s.size() >= static_cast<size_t>(kTileRows * kTileCols) &&
                   w.acc.size() >= static_cast<size_t>(kTileRows * Dv));
  ATTNSCOPE_DCHECK(lse != nullptr && m != nullptr && l != nullptr);
  const float* q_tile = op.q + i0 * D;
  // With the kv tiles paired (bf16_dot), the q tile is paired once for all of them.
  const bool paired = op.kt_pairs != nullptr;
  ATTNSCOPE_DCHECK(!paired || (x.bf16_dot && (op.v_pairs != nullptr || stats_only)));
  const int64_t q_words = (D + 1) / 2;
  if (paired) {
    w.q_pairs.resize(static_cast<size_t>(kTileRows * q_words));
    pair_rows(rows, D, q_tile, D, w.q_pairs.data());
  }

  std::fill(w.m.begin(), w.m.end(), -std::numeric_limits<float>::infinity());
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  std::fill(w.acc.begin(), w.acc.end(), 0.0f);
  for (int64_t jt = 0; jt < n_kv; ++jt) {
    cancel.check();
    const int64_t j0 = jt * kTileCols;
    const ScoreTile t{i0, j0, rows, std::min(kTileCols, Sk - j0), kTileCols};
    const bool pool = pooled != nullptr && pooled->overlaps(t);
    const bool skip = causally_hidden(prm, t) && fill_is_neg_inf(x) && op.kv_finite[jt];
    if (skip && rec != nullptr) rec->skipped_tile(x, t);
    if (skip && !pool) continue;
    const Bf16Pairs s_pairs = paired ? Bf16Pairs{w.q_pairs.data(), q_words, 1,
                                                 op.kt_pairs + jt * kt_pairs_block(D), kTileCols}
                                     : Bf16Pairs{};
    const float* kt = paired ? nullptr : op.kt + jt * D * kTileCols;
    score_tile(x, t, q_tile, kt, kTileCols, w.s.data(), nullptr, s_pairs);
    mask_tile(x, t, w.s.data(), nullptr);
    if (pool) pooled->add({t, w.s.data(), nullptr, nullptr, nullptr}, worker);
    if (skip) continue;
    if (stats_only) {
      online_softmax_update(x, t, w.s.data(), w.p.data(), w.m.data(), w.l.data(), nullptr, 0);
      continue;
    }
    BlockMax s_max;  // of S against the new m, for the trace
    online_softmax_update(x, t, w.s.data(), w.p.data(), w.m.data(), w.l.data(), w.acc.data(), Dv,
                          rec != nullptr ? &s_max : nullptr);
    const Bf16Pairs pv_pairs =
        paired ? Bf16Pairs{nullptr, 0, 0, op.v_pairs + jt * v_pairs_block(Dv), paired_ld(Dv)}
               : Bf16Pairs{};
    accumulate_pv(x, t, w.p.data(), op.v + j0 * Dv, w.acc.data(), pv_pairs);
    if (rec != nullptr) {
      rec->forward_tile(x, t, w.s.data(), w.p.data(), w.m.data(), w.acc.data(), &s_max);
    }
  }
  // Stats only: acc stays 0 and the epilogue's O goes back into it.
  forward_epilogue(x, rows, w.m.data(), w.l.data(), w.acc.data(), stats_only ? w.acc.data() : o,
                   lse, m, l);
}

void fused_forward(const AttnParams& prm, const PreparedInputs& in, int threads,
                   const CpuForwardOutputs& out, TraceRecorder* rec, PooledCells* pooled,
                   const CancelPoll& cancel) {
  const int64_t H = prm.heads, Hk = prm.kv_heads, Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int64_t D = prm.head_dim, Dv = prm.head_dim_v;
  const int64_t n_q = tile_count(Sq, kTileRows), n_kv = tile_count(Sk, kTileCols);

  // bf16_dot: K^T and V paired once here rather than once per q tile, and no fp32 K^T.
  const bool pair = make_head_context(prm, Mode::fused, 0, 0).bf16_dot;
  const Buffer<float> kt =
      pair ? Buffer<float>() : transpose_kv_tiles(in.k, prm.batch * Hk, Sk, D, threads);
  const Buffer<uint32_t> kt_pairs =
      pair ? pair_kt_tiles(in.k, prm.batch * Hk, Sk, D, threads) : Buffer<uint32_t>();
  const bool pair_v = pair && out.o != nullptr;  // out.o null: the statistics alone, no P V
  const Buffer<uint32_t> v_pairs =
      pair_v ? pair_v_tiles(in.v, prm.batch * Hk, Sk, Dv, threads) : Buffer<uint32_t>();
  const std::vector<uint8_t> kv_finite = finite_kv_tiles(prm, in);
  std::vector<ForwardScratch> scratch(static_cast<size_t>(threads), ForwardScratch(Dv));

  // Items run last q tile first: under causal masking those are the longest.
  parallel_for(prm.batch * H * n_q, threads, [&](int64_t item, int worker) {
    const int64_t bh = item / n_q, qt = n_q - 1 - item % n_q;
    const int64_t b = bh / H, h = bh % H;
    const int64_t bkv = b * Hk + prm.kv_head_of(h);
    const FusedHeadOperands op{in.q + bh * Sq * D,
                               pair ? nullptr : kt.data() + bkv * n_kv * D * kTileCols,
                               in.v + bkv * Sk * Dv,
                               kv_finite.data() + bkv * n_kv,
                               pair ? kt_pairs.data() + bkv * n_kv * kt_pairs_block(D) : nullptr,
                               pair_v ? v_pairs.data() + bkv * n_kv * v_pairs_block(Dv) : nullptr};
    const int64_t row = bh * Sq + qt * kTileRows;
    const bool pooled_head = pooled != nullptr && b == pooled->head().b && h == pooled->head().h;
    fused_forward_q_tile(make_head_context(prm, Mode::fused, b, h), qt, op,
                         scratch[static_cast<size_t>(worker)],
                         out.o != nullptr ? out.o + row * Dv : nullptr, out.lse + row, out.m + row,
                         out.l + row, rec, cancel, pooled_head ? pooled : nullptr, worker);
  });
}

}  // namespace attnscope::cpu
