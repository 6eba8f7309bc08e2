// Eager ("unfused") attention emulated op by op at a low precision: every op's output is
// rounded, as when `softmax(q @ k.T * scale).masked_fill(...) @ v` and its autograd run in
// fp16 / bf16. Rows are materialised in blocks of Br queries against all Sk keys.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/forward_stages.h"
#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/precision.h"

namespace attnscope::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// out = A X^T, out [rows x Sk] (row stride Sk), A [rows x dim] (row stride dim), X^T of one head
// in the transpose_kv_tiles layout.
void times_transposed(int64_t rows, int64_t sk, int64_t dim, const float* a, const float* xt,
                      float* out) {
  for (int64_t jt = 0; jt < tile_count(sk, kTileCols); ++jt) {
    const int64_t j0 = jt * kTileCols;
    gemm_tile(rows, std::min(kTileCols, sk - j0), dim, a, dim, 1, xt + jt * dim * kTileCols,
              kTileCols, out + j0, sk, 1.0f, false);
  }
}

// Scores of a block t (t.j0 = 0, t.cols = Sk): s = round(round(q.k) * scale), softcap as
// round(cap * round(tanh(round(s / cap)))), s = round(s + round(bias)), masked s = the rounded
// fill. gf = d s / d(scale q.k) from the rounded tanh, 0 where masked. q [rows x D], kt: K^T
// of the head in kv tiles.
void unfused_scores(const HeadContext& x, const ScoreTile& t, const float* q, const float* kt,
                    float* s, float* gf) {
  times_transposed(t.rows, t.cols, x.dim, q, kt, s);
  const Precision pr = x.precision;
  const AttnParams& p = *x.params;
  for (int64_t r = 0; r < t.rows; ++r) {
    float* s_r = s + r * t.ld;
    float* gf_r = gf + r * t.ld;
    round_copy(pr, s_r, s_r, t.cols);
    scale_in_place(s_r, x.scale, t.cols);
    round_copy(pr, s_r, s_r, t.cols);
    std::fill(gf_r, gf_r + t.cols, 1.0f);
    if (x.softcap > 0) {
      for (int64_t c = 0; c < t.cols; ++c) {
        const float th = round_to(pr, std::tanh(round_to(pr, s_r[c] / x.softcap)));
        s_r[c] = round_to(pr, x.softcap * th);
        gf_r[c] = 1 - th * th;
      }
    }
    if (p.bias != nullptr) {
      const BroadcastStrides& st = p.bias_strides;
      const double* b_r = p.bias + x.b * st.b + x.h * st.h + (t.i0 + r) * st.q;
      for (int64_t c = 0; c < t.cols; ++c) {
        s_r[c] += round_to(pr, static_cast<float>(b_r[c * st.k]));
      }
      round_copy(pr, s_r, s_r, t.cols);
    }
  }
  mask_tile(x, t, s, gf);
}

// Row softmax in fp32 from rounded scores, output rounded: p = round(exp(s - m) / l). A row
// of -inf gives p = 0 (l = 0) under MaskFill::safe, NaN otherwise.
void unfused_softmax(const HeadContext& x, const ScoreTile& t, const float* s, float* p, float* m,
                     float* l) {
  for (int64_t r = 0; r < t.rows; ++r) {
    const float* s_r = s + r * t.ld;
    float* p_r = p + r * t.ld;
    m[r] = max_propagating_nan(s_r, t.cols);
    if (m[r] == -kInf && x.safe) {
      std::fill(p_r, p_r + t.cols, 0.0f);
      l[r] = 0;
      continue;
    }
    l[r] = exp_shifted_sum(s_r, m[r], p_r, t.cols);
    scale_in_place(p_r, 1.0f / l[r], t.cols);
    round_copy(x.precision, p_r, p_r, t.cols);
  }
}

// Softmax backward of a row block, op by op: dP = round(dP), D = rowsum(dP * P) in fp32,
// dS = round(P (dP - D)), then through softcap / mask and the scale: g = round(round(dS * gf) *
// scale). dp is rounded in place; d receives D per row; g [rows x Sk] like the scores.
void unfused_grad_scores(const HeadContext& x, const ScoreTile& t, const float* p, float* dp,
                         const float* gf, float* d, float* g) {
  const Precision pr = x.precision;
  for (int64_t r = 0; r < t.rows; ++r) {
    float* dp_r = dp + r * t.ld;
    const float* p_r = p + r * t.ld;
    const float* gf_r = gf + r * t.ld;
    float* g_r = g + r * t.ld;
    round_copy(pr, dp_r, dp_r, t.cols);
    d[r] = dot_f32(dp_r, p_r, t.cols);
    for (int64_t c = 0; c < t.cols; ++c) g_r[c] = p_r[c] * (dp_r[c] - d[r]);
    round_copy(pr, g_r, g_r, t.cols);
    for (int64_t c = 0; c < t.cols; ++c) g_r[c] *= gf_r[c];
    round_copy(pr, g_r, g_r, t.cols);
    scale_in_place(g_r, x.scale, t.cols);
    round_copy(pr, g_r, g_r, t.cols);
  }
}

// dst[0:n] += round(src[0:n]); src is rounded in place.
void add_rounded(Precision precision, float* src, float* dst, int64_t n) {
  round_copy(precision, src, src, n);
  for (int64_t e = 0; e < n; ++e) dst[e] += src[e];
}

// Per-worker row-block buffers [Br, Sk].
struct UnfusedScratch {
  std::vector<float> s, gf, p, dp;
  std::vector<float> m, l;  // [Br]
};

std::vector<UnfusedScratch> make_scratch(int threads, int64_t sk) {
  std::vector<UnfusedScratch> scratch(static_cast<size_t>(threads));
  for (UnfusedScratch& w : scratch) {
    for (std::vector<float>* buf : {&w.s, &w.gf, &w.p, &w.dp}) {
      buf->resize(static_cast<size_t>(kTileRows * sk));
    }
    w.m.resize(static_cast<size_t>(kTileRows));
    w.l.resize(w.m.size());
  }
  return scratch;
}

}  // namespace

void unfused_forward(const AttnParams& prm, const PreparedInputs& in, int threads,
                     const CpuForwardOutputs& out) {
  const int64_t H = prm.heads, Hk = prm.kv_heads, Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int64_t D = prm.head_dim, Dv = prm.head_dim_v;
  const int64_t n_q = tile_count(Sq, kTileRows);
  const int64_t n_kv = tile_count(Sk, kTileCols);
  const std::vector<float> kt = transpose_kv_tiles(in.k, prm.batch * Hk, Sk, D, threads);
  std::vector<UnfusedScratch> scratch = make_scratch(threads, Sk);

  parallel_for(prm.batch * H * n_q, threads, [&](int64_t item, int worker) {
    UnfusedScratch& w = scratch[static_cast<size_t>(worker)];
    const int64_t bh = item / n_q, b = bh / H, h = bh % H;
    const int64_t bkv = b * Hk + prm.kv_head_of(h);
    const HeadContext x = make_head_context(prm, Mode::unfused, b, h);
    const int64_t i0 = (item % n_q) * kTileRows, row = bh * Sq + i0;
    const ScoreTile t{i0, 0, std::min(kTileRows, Sq - i0), Sk, Sk};
    unfused_scores(x, t, in.q + row * D, kt.data() + bkv * n_kv * D * kTileCols, w.s.data(),
                   w.gf.data());
    unfused_softmax(x, t, w.s.data(), w.p.data(), out.m + row, out.l + row);
    float* o = out.o + row * Dv;
    gemm_tile(t.rows, Dv, Sk, w.p.data(), Sk, 1, in.v + bkv * Sk * Dv, Dv, o, Dv, 1.0f, false);
    round_copy(x.precision, o, o, t.rows * Dv);
    for (int64_t r = row; r < row + t.rows; ++r) {
      const bool empty = out.m[r] == -kInf;
      const float empty_lse = x.safe ? -kInf : std::numeric_limits<float>::quiet_NaN();
      out.lse[r] = empty ? empty_lse : round_to(x.precision, out.m[r] + std::log(out.l[r]));
    }
  });
}

// Backward per (batch, kv head), op by op as autograd runs it on the expanded (GQA) k, v:
// dV_h = round(P^T dO), dP = round(dO V^T), g (unfused_grad_scores), dQ = round(g K),
// dK_h = round(g^T Q); then dK, dV = round(sum over the group of round(dK_h), round(dV_h)).
void unfused_backward(const AttnParams& prm, const PreparedInputs& in, int threads,
                      const CpuBackwardOutputs& out) {
  const int64_t H = prm.heads, Hk = prm.kv_heads, G = prm.group_size();
  const int64_t Sq = prm.seqlen_q, Sk = prm.seqlen_k, D = prm.head_dim, Dv = prm.head_dim_v;
  const int64_t n_q = tile_count(Sq, kTileRows);
  const int64_t n_kv = tile_count(Sk, kTileCols);
  const std::vector<float> kt = transpose_kv_tiles(in.k, prm.batch * Hk, Sk, D, threads);
  const std::vector<float> vt = transpose_kv_tiles(in.v, prm.batch * Hk, Sk, Dv, threads);
  std::vector<UnfusedScratch> scratch = make_scratch(threads, Sk);
  std::vector<std::vector<float>> dk_head(static_cast<size_t>(threads)), dv_head(dk_head.size());

  parallel_for(prm.batch * Hk, threads, [&](int64_t bkv, int worker) {
    UnfusedScratch& w = scratch[static_cast<size_t>(worker)];
    std::vector<float>& dk_h = dk_head[static_cast<size_t>(worker)];
    std::vector<float>& dv_h = dv_head[static_cast<size_t>(worker)];
    const int64_t b = bkv / Hk, kvh = bkv % Hk;
    const float* k = in.k + bkv * Sk * D;
    float* dk = out.dk + bkv * Sk * D;
    float* dv = out.dv + bkv * Sk * Dv;
    std::fill(dk, dk + Sk * D, 0.0f);
    std::fill(dv, dv + Sk * Dv, 0.0f);
    for (int64_t h = kvh * G; h < (kvh + 1) * G; ++h) {
      const int64_t bh = b * H + h;
      const HeadContext x = make_head_context(prm, Mode::unfused, b, h);
      dk_h.assign(static_cast<size_t>(Sk * D), 0.0f);
      dv_h.assign(static_cast<size_t>(Sk * Dv), 0.0f);
      for (int64_t qt = 0; qt < n_q; ++qt) {
        const int64_t i0 = qt * kTileRows, row = bh * Sq + i0;
        const ScoreTile t{i0, 0, std::min(kTileRows, Sq - i0), Sk, Sk};
        const float* q = in.q + row * D;
        const float* dout = in.dout + row * Dv;
        unfused_scores(x, t, q, kt.data() + bkv * n_kv * D * kTileCols, w.s.data(), w.gf.data());
        unfused_softmax(x, t, w.s.data(), w.p.data(), w.m.data(), w.l.data());
        gemm_tile(Sk, Dv, t.rows, w.p.data(), 1, Sk, dout, Dv, dv_h.data(), Dv, 1.0f, true);
        times_transposed(t.rows, Sk, Dv, dout, vt.data() + bkv * n_kv * Dv * kTileCols,
                         w.dp.data());
        float* g = w.s.data();  // the scores are no longer needed
        unfused_grad_scores(x, t, w.p.data(), w.dp.data(), w.gf.data(), out.d + row, g);
        float* dq = out.dq + row * D;
        gemm_tile(t.rows, D, Sk, g, Sk, 1, k, D, dq, D, 1.0f, false);
        round_copy(x.precision, dq, dq, t.rows * D);
        gemm_tile(Sk, D, t.rows, g, 1, Sk, q, D, dk_h.data(), D, 1.0f, true);
      }
      add_rounded(x.precision, dk_h.data(), dk, Sk * D);
      add_rounded(x.precision, dv_h.data(), dv, Sk * Dv);
    }
    const Precision pr = emulated_precision(prm.precision);
    round_copy(pr, dk, dk, Sk * D);
    round_copy(pr, dv, dv, Sk * Dv);
  });
}

}  // namespace attnscope::cpu
