// Driver of the tiled FlashAttention-2 forward on CPU: one work item per (batch, head, q tile),
// walking the kv tiles through the forward stages.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/forward_stages.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tile_math.h"

namespace attnscope::cpu {
namespace {

// Per-worker tile buffers.
struct ForwardScratch {
  std::vector<float> s, p;  // [Br, Bc]
  std::vector<float> m, l;  // [Br]
  std::vector<float> acc;   // [Br, Dv]
};

}  // namespace

void fused_forward(const AttnParams& prm, const PreparedInputs& in, int threads,
                   const CpuForwardOutputs& out) {
  const int64_t H = prm.heads, Hk = prm.kv_heads, Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int64_t D = prm.head_dim, Dv = prm.head_dim_v;
  const int64_t n_q = tile_count(Sq, kTileRows), n_kv = tile_count(Sk, kTileCols);
  const int64_t kv_groups = prm.batch * Hk;

  const std::vector<float> kt = transpose_kv_tiles(in.k, kv_groups, Sk, D, threads);
  const std::vector<uint8_t> kv_finite = finite_kv_tiles(prm, in, threads);

  std::vector<ForwardScratch> scratch(static_cast<size_t>(threads));
  for (ForwardScratch& w : scratch) {
    w.s.resize(static_cast<size_t>(kTileRows * kTileCols));
    w.p.resize(w.s.size());
    w.m.resize(static_cast<size_t>(kTileRows));
    w.l.resize(w.m.size());
    w.acc.resize(static_cast<size_t>(kTileRows * Dv));
  }

  // Items run last q tile first: under causal masking those are the longest.
  parallel_for(prm.batch * H * n_q, threads, [&](int64_t item, int worker) {
    ForwardScratch& w = scratch[static_cast<size_t>(worker)];
    const int64_t bh = item / n_q, qt = n_q - 1 - item % n_q;
    const int64_t b = bh / H, h = bh % H;
    const int64_t bkv = b * Hk + prm.kv_head_of(h);
    const HeadContext x = make_head_context(prm, Mode::fused, b, h);
    const int64_t i0 = qt * kTileRows, rows = std::min(kTileRows, Sq - i0);
    const float* q_tile = in.q + (bh * Sq + i0) * D;

    std::fill(w.m.begin(), w.m.end(), -std::numeric_limits<float>::infinity());
    std::fill(w.l.begin(), w.l.end(), 0.0f);
    std::fill(w.acc.begin(), w.acc.end(), 0.0f);
    for (int64_t jt = 0; jt < n_kv; ++jt) {
      const int64_t j0 = jt * kTileCols;
      const ScoreTile t{i0, j0, rows, std::min(kTileCols, Sk - j0), kTileCols};
      if (causally_hidden(prm, t) && fill_is_neg_inf(x) &&
          kv_finite[static_cast<size_t>(bkv * n_kv + jt)]) {
        continue;
      }
      score_tile(x, t, q_tile, kt.data() + (bkv * n_kv + jt) * D * kTileCols, kTileCols, w.s.data(),
                 nullptr);
      mask_tile(x, t, w.s.data(), nullptr);
      online_softmax_update(t, w.s.data(), w.p.data(), w.m.data(), w.l.data(), w.acc.data(), Dv);
      accumulate_pv(x, t, w.p.data(), in.v + (bkv * Sk + j0) * Dv, w.acc.data());
    }
    const int64_t row = bh * Sq + i0;
    forward_epilogue(x, rows, w.m.data(), w.l.data(), w.acc.data(), out.o + row * Dv, out.lse + row,
                     out.m + row, out.l + row);
  });
}

}  // namespace attnscope::cpu
