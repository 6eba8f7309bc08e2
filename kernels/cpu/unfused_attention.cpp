// Drivers of the eager ("unfused") attention emulated op by op at a low precision (ops in
// unfused_stages.h). Rows are materialised in blocks of Br queries against all Sk keys.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/pooled_cells.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_recorder.h"
#include "kernels/cpu/unfused_stages.h"
#include "kernels/precision.h"

namespace attnscope::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// dst[0:n] += round(src[0:n]); src is rounded in place.
void add_rounded(Precision precision, float* src, float* dst, int64_t n) {
  round_copy(precision, src, src, n);
  for (int64_t e = 0; e < n; ++e) dst[e] += src[e];
}

// Rows [row0, row0 + rows) of a prepared input are known to be finite (its row maxima).
bool known_finite(const std::vector<float>& row_max, int64_t row0, int64_t rows) {
  return !row_max.empty() && rows_finite(row_max, row0, rows);
}

// Per-worker row-block buffers [Br, Sk]; pd (the dropped P) only with dropout.
struct UnfusedScratch {
  std::vector<float> s, gf, p, pd, dp, ds;
  std::vector<float> m, l;  // [Br]
};

std::vector<UnfusedScratch> make_scratch(const AttnParams& prm, int threads) {
  std::vector<UnfusedScratch> scratch(static_cast<size_t>(threads));
  for (UnfusedScratch& w : scratch) {
    const size_t n = static_cast<size_t>(kTileRows * prm.seqlen_k);
    for (std::vector<float>* buf : {&w.s, &w.gf, &w.p, &w.dp, &w.ds}) buf->resize(n);
    if (prm.dropout_keep != nullptr) w.pd.resize(n);
    w.m.resize(static_cast<size_t>(kTileRows));
    w.l.resize(w.m.size());
  }
  return scratch;
}

// Chunks of the stages of one q tile when their work is spread over several workers: query
// rows of the tile, and keys (whole kv tiles, so trace tiles never straddle two chunks).
constexpr int64_t kRowChunk = 8;
constexpr int64_t kKeyChunk = 4 * kTileCols;

// fn(begin, end) for the chunks [begin, end) of [0, n), on up to `threads` workers.
void for_chunks(int64_t n, int64_t chunk, int threads,
                const std::function<void(int64_t begin, int64_t end)>& fn) {
  parallel_for(tile_count(n, chunk), threads,
               [&](int64_t c, int) { fn(c * chunk, std::min(n, (c + 1) * chunk)); });
}

}  // namespace

void unfused_forward(const AttnParams& prm, const PreparedInputs& in, int threads,
                     const CpuForwardOutputs& out, TraceRecorder* rec, const CancelPoll& cancel) {
  const int64_t H = prm.heads, Hk = prm.kv_heads, Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int64_t D = prm.head_dim, Dv = prm.head_dim_v;
  const int64_t n_q = tile_count(Sq, kTileRows);
  const int64_t n_kv = tile_count(Sk, kTileCols);
  const Buffer<float> kt = transpose_kv_tiles(in.k, prm.batch * Hk, Sk, D, threads);
  std::vector<UnfusedScratch> scratch = make_scratch(prm, threads);

  parallel_for(prm.batch * H * n_q, threads, [&](int64_t item, int worker) {
    cancel.check();
    UnfusedScratch& w = scratch[static_cast<size_t>(worker)];
    const int64_t bh = item / n_q, b = bh / H, h = bh % H;
    const int64_t bkv = b * Hk + prm.kv_head_of(h);
    const HeadContext x = make_head_context(prm, Mode::unfused, b, h);
    const int64_t i0 = (item % n_q) * kTileRows, row = bh * Sq + i0;
    const ScoreTile t{i0, 0, std::min(kTileRows, Sq - i0), Sk, Sk};
    const int64_t n = causal_key_end(prm, t);
    unfused_scores(x, t, in.q + row * D, kt.data() + bkv * n_kv * D * kTileCols, w.s.data(),
                   w.gf.data(), n);
    unfused_softmax(x, t, w.s.data(), w.p.data(), out.m + row, out.l + row);
    if (rec != nullptr) rec->forward_rows(x, t, w.s.data(), w.p.data(), out.m + row);
    const float* pd = unfused_dropout(x, t, w.p.data(), w.pd.data());
    float* o = out.o + row * Dv;
    // O = P V stops at key n where the hidden keys' P is 0 and their values are finite.
    const bool trim =
        n > 0 && n < Sk && zero_from(t, pd, n) && known_finite(in.v_max, bkv * Sk + n, Sk - n);
    gemm_tile(t.rows, Dv, trim ? n : Sk, pd, Sk, 1, in.v + bkv * Sk * Dv, Dv, o, Dv, 1.0f, false);
    round_copy(x.precision, o, o, t.rows * Dv);
    for (int64_t r = row; r < row + t.rows; ++r) {
      const bool empty = out.m[r] == -kInf;
      const float empty_lse = x.safe ? -kInf : std::numeric_limits<float>::quiet_NaN();
      out.lse[r] = empty ? empty_lse : round_to(x.precision, out.m[r] + std::log(out.l[r]));
    }
  });
}

namespace {

// Backward per (batch, kv head), op by op as autograd runs it on the expanded (GQA) k, v:
// dV_h = round(Pd^T dO) (Pd = round(P * noise) with dropout, else P), dP = round(dO V^T) (with
// dropout then round(dP * noise)), dS = round(P (dP - D)), g = unfused_score_grad,
// dQ = round(g K), dK_h = round(g^T Q); then dK, dV = round(sum over the group of round(dK_h),
// round(dV_h)), summed in head order. BackwardP is ignored: autograd of eager attention saves P.
// Three schedules, by what there is to share among the workers: with at least as many (batch,
// kv head) groups as workers each worker takes whole groups; with fewer, the groups run one at
// a time, and their query heads go to the workers when there are at least as many, each head's
// dK_h and dV_h kept until the group sums them; with fewer still (one long head) every stage of
// a q tile is split over the workers, by query rows or by keys. gemm_tile sums each element in
// the same order whatever block it is in, so every schedule gives the same bits.
class UnfusedBackward {
 public:
  UnfusedBackward(const AttnParams& prm, const PreparedInputs& in, int threads,
                  const CpuBackwardOutputs& out, TraceRecorder* rec, PooledCells* pooled,
                  const CancelPoll& cancel)
      : prm_(prm),
        in_(in),
        threads_(threads),
        out_(out),
        rec_(rec),
        pooled_(pooled),
        cancel_(cancel) {}

  void run() {
    const int64_t groups = prm_.batch * prm_.kv_heads, G = prm_.group_size();
    const int64_t Sk = prm_.seqlen_k, D = prm_.head_dim, Dv = prm_.head_dim_v;
    kt_ = transpose_kv_tiles(in_.k, groups, Sk, D, threads_);
    vt_ = transpose_kv_tiles(in_.v, groups, Sk, Dv, threads_);
    if (groups >= threads_) {
      scratch_ = make_scratch(prm_, threads_);
      std::vector<HeadGradients> heads(static_cast<size_t>(threads_));
      parallel_for(groups, threads_, [&](int64_t bkv, int worker) {
        group(bkv, [&](int64_t h) -> HeadGradients& {
          HeadGradients& mine = heads[static_cast<size_t>(worker)];
          head(bkv, h, worker, 1, mine);
          return mine;
        });
      });
      return;
    }
    const bool by_heads = G >= threads_;
    scratch_ = make_scratch(prm_, by_heads ? threads_ : 1);
    std::vector<HeadGradients> heads(static_cast<size_t>(by_heads ? G : 1));
    for (int64_t bkv = 0; bkv < groups; ++bkv) {
      if (by_heads) {
        const int64_t h0 = bkv % prm_.kv_heads * G;
        parallel_for(G, threads_, [&](int64_t x, int worker) {
          head(bkv, h0 + x, worker, 1, heads[static_cast<size_t>(x)]);
        });
      }
      group(bkv, [&](int64_t h) -> HeadGradients& {
        if (by_heads) return heads[static_cast<size_t>(h % G)];
        head(bkv, h, 0, threads_, heads[0]);
        return heads[0];
      });
    }
  }

 private:
  // Head h's own dK_h [Sk, D] and dV_h [Sk, Dv] in fp32, before their rounding.
  struct HeadGradients {
    std::vector<float> dk, dv;
  };

  // dK, dV of group bkv: the sum of its heads' rounded dK_h, dV_h in head order, rounded;
  // gradients(h) gives head h's, computing them if needed.
  void group(int64_t bkv, const std::function<HeadGradients&(int64_t h)>& gradients) {
    const int64_t G = prm_.group_size(), kvh = bkv % prm_.kv_heads;
    const int64_t Sk = prm_.seqlen_k, D = prm_.head_dim, Dv = prm_.head_dim_v;
    float* dk = out_.dk + bkv * Sk * D;
    float* dv = out_.dv + bkv * Sk * Dv;
    std::fill(dk, dk + Sk * D, 0.0f);
    std::fill(dv, dv + Sk * Dv, 0.0f);
    const Precision pr = emulated_precision(prm_.precision);
    for (int64_t h = kvh * G; h < (kvh + 1) * G; ++h) {
      HeadGradients& head_h = gradients(h);
      add_rounded(pr, head_h.dk.data(), dk, Sk * D);
      add_rounded(pr, head_h.dv.data(), dv, Sk * Dv);
    }
    round_copy(pr, dk, dk, Sk * D);
    round_copy(pr, dv, dv, Sk * Dv);
  }

  // Query head h of group bkv on `worker`'s scratch, its stages split over `inner` workers:
  // dQ rows into out.dq, dK_h and dV_h into `into`.
  void head(int64_t bkv, int64_t h, int worker, int inner, HeadGradients& into) {
    const int64_t H = prm_.heads, Sq = prm_.seqlen_q, Sk = prm_.seqlen_k;
    const int64_t D = prm_.head_dim, Dv = prm_.head_dim_v;
    const int64_t n_q = tile_count(Sq, kTileRows), n_kv = tile_count(Sk, kTileCols);
    const int64_t b = bkv / prm_.kv_heads, bh = b * H + h;
    UnfusedScratch& w = scratch_[static_cast<size_t>(worker)];
    const float* k = in_.k + bkv * Sk * D;
    const float* kt_g = kt_.data() + bkv * n_kv * D * kTileCols;
    const float* vt_g = vt_.data() + bkv * n_kv * Dv * kTileCols;
    const HeadContext x = make_head_context(prm_, Mode::unfused, b, h);
    std::vector<float>& dk_h = into.dk;
    std::vector<float>& dv_h = into.dv;
    dk_h.assign(static_cast<size_t>(Sk * D), 0.0f);
    dv_h.assign(static_cast<size_t>(Sk * Dv), 0.0f);
    for (int64_t qt = 0; qt < n_q; ++qt) {
      cancel_.check();
      const int64_t i0 = qt * kTileRows, row = bh * Sq + i0;
      const ScoreTile t{i0, 0, std::min(kTileRows, Sq - i0), Sk, Sk};
      const float* q = in_.q + row * D;
      const float* dout = in_.dout + row * Dv;
      // Rows [r0, r1) of the tile: a row block of its own, at element offset r0 * Sk.
      const auto rows_of = [&](int64_t r0, int64_t r1) {
        return ScoreTile{i0 + r0, 0, r1 - r0, Sk, Sk};
      };
      const int64_t n = causal_key_end(prm_, t);
      for_chunks(t.rows, kRowChunk, inner, [&](int64_t r0, int64_t r1) {
        const ScoreTile u = rows_of(r0, r1);
        const int64_t e = r0 * Sk;
        unfused_scores(x, u, q + r0 * D, kt_g, w.s.data() + e, w.gf.data() + e, n);
        unfused_softmax(x, u, w.s.data() + e, w.p.data() + e, w.m.data() + r0, w.l.data() + r0);
        unfused_dropout(x, u, w.p.data() + e, x.dropout ? w.pd.data() + e : nullptr);
      });
      if (rec_ != nullptr) rec_->rows_ready(bh, i0, t.rows, w.m.data(), w.l.data(), nullptr);
      const float* pd = x.dropout ? w.pd.data() : w.p.data();
      // Untraced, every product stops at key `end`: the hidden keys' P (and so the dropped P,
      // dS and g) are zeros there, every factor they meet is finite, and a sum started at +0
      // is left as it was by zero terms; their dP is set to 0 (it only meets P = 0).
      const bool trim = rec_ == nullptr && pooled_ == nullptr && n > 0 && n < Sk &&
                        zero_from(t, w.p.data(), n) && known_finite(in_.q_max, row, t.rows) &&
                        known_finite(in_.dout_max, row, t.rows) &&
                        known_finite(in_.k_max, bkv * Sk + n, Sk - n) &&
                        known_finite(in_.v_max, bkv * Sk + n, Sk - n);
      const int64_t end = trim ? n : Sk;
      // dV_h by keys; dP and dS by rows.
      const int64_t key_chunks = tile_count(end, kKeyChunk);
      parallel_for(key_chunks + tile_count(t.rows, kRowChunk), inner, [&](int64_t item, int) {
        if (item < key_chunks) {
          const int64_t j0 = item * kKeyChunk, j1 = std::min(Sk, j0 + kKeyChunk);
          gemm_tile(j1 - j0, Dv, t.rows, pd + j0, 1, Sk, dout, Dv, dv_h.data() + j0 * Dv, Dv, 1.0f,
                    true);
          return;
        }
        const int64_t r0 = (item - key_chunks) * kRowChunk;
        const ScoreTile u = rows_of(r0, std::min(t.rows, r0 + kRowChunk));
        const int64_t e = r0 * Sk;
        times_transposed(u.rows, end, Sk, Dv, dout + r0 * Dv, vt_g, w.dp.data() + e);
        for (int64_t r = 0; r < u.rows; ++r) {
          std::fill(w.dp.data() + e + r * Sk + end, w.dp.data() + e + (r + 1) * Sk, 0.0f);
        }
        unfused_softmax_backward(x, u, w.p.data() + e, w.dp.data() + e, out_.d + row + r0,
                                 w.ds.data() + e);
      });
      if (pooled_ != nullptr && b == pooled_->head().b && h == pooled_->head().h &&
          pooled_->overlaps(t)) {
        pooled_->add({t, w.s.data(), w.p.data(), w.dp.data(), w.ds.data()}, worker);
      }
      if (rec_ != nullptr) {
        for_chunks(Sk, kKeyChunk, inner, [&](int64_t j0, int64_t j1) {
          rec_->backward_tile(x, {i0, j0, t.rows, j1 - j0, Sk},
                              {w.s.data() + j0,
                               w.p.data() + j0,
                               w.dp.data() + j0,
                               w.ds.data() + j0,
                               w.m.data(),
                               w.l.data(),
                               {},
                               {},
                               {}});
        });
      }
      // g = dS in place, then dQ by rows and dK_h by keys.
      for_chunks(t.rows, kRowChunk, inner, [&](int64_t r0, int64_t r1) {
        const ScoreTile u = rows_of(r0, r1);
        float* g = w.ds.data() + r0 * Sk;
        unfused_score_grad(x, u, w.gf.data() + r0 * Sk, g);
        float* dq = out_.dq + (row + r0) * D;
        gemm_tile(u.rows, D, end, g, Sk, 1, k, D, dq, D, 1.0f, false);
        round_copy(x.precision, dq, dq, u.rows * D);
      });
      for_chunks(end, kKeyChunk, inner, [&](int64_t j0, int64_t j1) {
        gemm_tile(j1 - j0, D, t.rows, w.ds.data() + j0, 1, Sk, q, D, dk_h.data() + j0 * D, D, 1.0f,
                  true);
      });
    }
  }

  const AttnParams& prm_;
  const PreparedInputs& in_;
  const int threads_;
  const CpuBackwardOutputs& out_;
  TraceRecorder* const rec_;
  PooledCells* const pooled_;
  const CancelPoll& cancel_;
  Buffer<float> kt_, vt_;                // transpose_kv_tiles of K and V
  std::vector<UnfusedScratch> scratch_;  // per worker
};

}  // namespace

void unfused_backward(const AttnParams& prm, const PreparedInputs& in, int threads,
                      const CpuBackwardOutputs& out, TraceRecorder* rec, PooledCells* pooled,
                      const CancelPoll& cancel) {
  UnfusedBackward(prm, in, threads, out, rec, pooled, cancel).run();
}

}  // namespace attnscope::cpu
