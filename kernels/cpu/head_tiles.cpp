// Recomputation of one head's score-shaped intermediates (see head_tiles.h).
#include "kernels/cpu/head_tiles.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "kernels/cpu/backward_stages.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/unfused_stages.h"

namespace attnscope::cpu {
namespace {

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

// Rounded copy of n values (ones when src is null).
std::vector<float> rounded(Precision precision, const float* src, int64_t n) {
  std::vector<float> x(count(n), 1.0f);
  if (src != nullptr) round_copy(precision, src, x.data(), n);
  return x;
}

// src[0:n] rounded to the precision: src itself at f32, else a copy held in `copy`.
const float* rounded_view(Precision precision, const float* src, int64_t n,
                          std::vector<float>& copy) {
  if (precision == Precision::f32) return src;
  copy = rounded(precision, src, n);
  return copy.data();
}

// True when x[0:n] rounded to the precision is all finite (rounding may overflow to inf).
bool rounded_all_finite(Precision precision, const float* x, int64_t n) {
  if (precision == Precision::f32) return all_finite(x, n);
  float buf[256];
  for (int64_t e = 0; e < n; e += 256) {
    const int64_t len = std::min<int64_t>(256, n - e);
    round_copy(precision, x + e, buf, len);
    if (!all_finite(buf, len)) return false;
  }
  return true;
}

// validate() plus a (b, h) inside the batch and the query heads.
void validate_head(const AttnParams& p, const CpuAttnInputs& inputs, int64_t b, int64_t h) {
  validate(p, inputs);
  if (b < 0 || b >= p.batch || h < 0 || h >= p.heads) {
    throw std::invalid_argument("cpu_attention: batch / head index out of range");
  }
}

TileOperands tile_operands(const AttnParams& p, Mode mode, const CpuAttnInputs& inputs, int64_t b,
                           int64_t h, TileStage last) {
  validate_head(p, inputs, b, h);
  const int64_t Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim, Dv = p.head_dim_v;
  const int64_t bh = b * p.heads + h, bkv = b * p.kv_heads + p.kv_head_of(h);
  TileOperands op;
  op.x = make_head_context(p, mode, b, h);
  const Precision pr = op.x.precision;
  op.n_q = tile_count(Sq, kTileRows);
  op.n_kv = tile_count(Sk, kTileCols);
  op.q = rounded_view(pr, inputs.q + bh * Sq * D, Sq * D, op.q_copy);
  const float* k_raw = inputs.k + bkv * Sk * D;
  const float* v_raw = inputs.v + bkv * Sk * Dv;
  {
    std::vector<float> k_copy;
    op.kt = transpose_kv_tiles(rounded_view(pr, k_raw, Sk * D, k_copy), 1, Sk, D, 1);
  }
  if (last >= TileStage::dp) {
    if (inputs.dout != nullptr) {
      op.dout = rounded_view(pr, inputs.dout + bh * Sq * Dv, Sq * Dv, op.dout_copy);
    } else {
      op.dout_copy.assign(count(Sq * Dv), 1.0f);
      op.dout = op.dout_copy.data();
    }
    std::vector<float> v_copy;
    op.vt = transpose_kv_tiles(rounded_view(pr, v_raw, Sk * Dv, v_copy), 1, Sk, Dv, 1);
  }
  if (last >= TileStage::ds && mode == Mode::fused) {
    op.v = rounded_view(pr, v_raw, Sk * Dv, op.v_copy);
  }
  if (mode == Mode::fused && last >= TileStage::p) {
    op.kv_finite.resize(count(op.n_kv));
    for (int64_t jt = 0; jt < op.n_kv; ++jt) {
      const int64_t j0 = jt * kTileCols, cols = std::min(kTileCols, Sk - j0);
      op.kv_finite[count(jt)] = rounded_all_finite(pr, k_raw + j0 * D, cols * D) &&
                                rounded_all_finite(pr, v_raw + j0 * Dv, cols * Dv);
    }
  }
  return op;
}

}  // namespace

HeadOperands head_operands(const AttnParams& p, Mode mode, const CpuAttnInputs& inputs, int64_t b,
                           int64_t h) {
  validate_head(p, inputs, b, h);
  const int64_t Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim, Dv = p.head_dim_v;
  const int64_t bh = b * p.heads + h, bkv = b * p.kv_heads + p.kv_head_of(h);
  HeadOperands op;
  op.x = make_head_context(p, mode, b, h);
  const Precision pr = op.x.precision;
  op.n_q = tile_count(Sq, kTileRows);
  op.n_kv = tile_count(Sk, kTileCols);
  op.q = rounded(pr, inputs.q + bh * Sq * D, Sq * D);
  op.dout = rounded(pr, inputs.dout != nullptr ? inputs.dout + bh * Sq * Dv : nullptr, Sq * Dv);
  op.k = rounded(pr, inputs.k + bkv * Sk * D, Sk * D);
  op.v = rounded(pr, inputs.v + bkv * Sk * Dv, Sk * Dv);
  op.kt = transpose_kv_tiles(op.k.data(), 1, Sk, D, 1);
  op.vt = transpose_kv_tiles(op.v.data(), 1, Sk, Dv, 1);
  op.kv_finite.resize(count(op.n_kv));
  for (int64_t jt = 0; jt < op.n_kv; ++jt) {
    const int64_t j0 = jt * kTileCols, cols = std::min(kTileCols, Sk - j0);
    op.kv_finite[count(jt)] =
        all_finite(op.k.data() + j0 * D, cols * D) && all_finite(op.v.data() + j0 * Dv, cols * Dv);
  }
  return op;
}

TileStage last_stage(const MatrixSelection& which) {
  if (which.ds) return TileStage::ds;
  if (which.dp) return TileStage::dp;
  if (which.p) return TileStage::p;
  if (which.s) return TileStage::s;
  throw std::invalid_argument("cpu_head_matrices: select at least one of s, p, dp, ds");
}

HeadTiles::HeadTiles(const AttnParams& params, Mode mode, const CpuAttnInputs& inputs, int64_t b,
                     int64_t h, TileStage last, const ForwardRows* rows)
    : mode_(mode), last_(last), op_(tile_operands(params, mode, inputs, b, h, last)) {
  if (rows == nullptr || mode != Mode::fused) return;
  if (rows->m == nullptr || rows->l == nullptr || (last >= TileStage::ds && rows->d == nullptr)) {
    throw std::invalid_argument("cpu_head_matrices: forward rows need m, l (and d for dS)");
  }
  const int64_t at = (b * params.heads + h) * params.seqlen_q;
  row_m_ = rows->m + at;
  row_l_ = rows->l + at;
  row_d_ = rows->d != nullptr ? rows->d + at : nullptr;
}

HeadTiles::Scratch::Scratch(const HeadTiles& tiles)
    : fwd(tiles.op_.x.dim_v),
      o(count(kTileRows * tiles.op_.x.dim_v)),
      lse(count(kTileRows)),
      m(lse.size()),
      l(lse.size()),
      d(lse.size()) {
  if (tiles.mode_ == Mode::unfused) {
    for (std::vector<float>* buf : {&s, &gf, &p, &dp, &ds}) {
      buf->resize(count(kTileRows * tiles.op_.x.params->seqlen_k));
    }
  }
}

void HeadTiles::q_tile(int64_t qt, int64_t col_begin, int64_t col_end, Scratch& w,
                       const std::function<void(const TileBlock&)>& fn) const {
  if (mode_ == Mode::fused) {
    fused_q_tile(qt, col_begin, col_end, w, fn);
  } else {
    unfused_q_tile(qt, w, fn);
  }
}

void HeadTiles::forward_stats(int64_t qt, Scratch& w) const {
  const FusedHeadOperands fop{op_.q, op_.kt.data(), nullptr, op_.kv_finite.data()};
  fused_forward_q_tile(op_.x, qt, fop, w.fwd, nullptr, w.lse.data(), w.m.data(), w.l.data(),
                       nullptr);
}

void HeadTiles::fused_q_tile(int64_t qt, int64_t col_begin, int64_t col_end, Scratch& w,
                             const std::function<void(const TileBlock&)>& fn) const {
  const HeadContext& x = op_.x;
  const int64_t Sq = x.params->seqlen_q, Sk = x.params->seqlen_k, D = x.dim, Dv = x.dim_v;
  const int64_t i0 = qt * kTileRows, rows = std::min(kTileRows, Sq - i0);
  if (row_m_ != nullptr) {
    std::copy(row_m_ + i0, row_m_ + i0 + rows, w.m.begin());
    std::copy(row_l_ + i0, row_l_ + i0 + rows, w.l.begin());
    if (last_ == TileStage::ds) std::copy(row_d_ + i0, row_d_ + i0 + rows, w.d.begin());
  } else if (last_ == TileStage::ds) {
    const FusedHeadOperands fop{op_.q, op_.kt.data(), op_.v, op_.kv_finite.data()};
    fused_forward_q_tile(x, qt, fop, w.fwd, w.o.data(), w.lse.data(), w.m.data(), w.l.data(),
                         nullptr);
    backward_preprocess(x, rows, w.o.data(), op_.dout + i0 * Dv, w.d.data());
  } else if (last_ >= TileStage::p) {
    forward_stats(qt, w);
  }
  BackwardTileBuffers& b = w.tile;
  for (int64_t jt = col_begin / kTileCols; jt * kTileCols < col_end; ++jt) {
    const int64_t j0 = jt * kTileCols;
    const ScoreTile t{i0, j0, rows, std::min(kTileCols, Sk - j0), kTileCols};
    const float* kt = op_.kt.data() + jt * D * kTileCols;
    if (last_ == TileStage::ds) {
      fused_backward_intermediates(x, t, op_.q + i0 * D, kt, op_.dout + i0 * Dv,
                                   op_.vt.data() + jt * Dv * kTileCols, w.m.data(), w.l.data(),
                                   w.d.data(), b, last_);
    } else {
      // The stages of fused_backward_intermediates up to `last`; gf only feeds dS.
      score_tile(x, t, op_.q + i0 * D, kt, kTileCols, b.s.data(), nullptr);
      mask_tile(x, t, b.s.data(), nullptr);
      if (last_ >= TileStage::p) recompute_p(x, t, b.s.data(), w.m.data(), w.l.data(), b.p.data());
      if (last_ >= TileStage::dp) {
        compute_dp(x, t, op_.dout + i0 * Dv, op_.vt.data() + jt * Dv * kTileCols, kTileCols,
                   b.dp.data());
      }
    }
    fn({t, b.s.data(), last_ >= TileStage::p ? b.p.data() : nullptr,
        last_ >= TileStage::dp ? b.dp.data() : nullptr,
        last_ >= TileStage::ds ? b.ds.data() : nullptr});
  }
}

void HeadTiles::unfused_q_tile(int64_t qt, Scratch& w,
                               const std::function<void(const TileBlock&)>& fn) const {
  const HeadContext& x = op_.x;
  const int64_t Sq = x.params->seqlen_q, Sk = x.params->seqlen_k;
  const int64_t i0 = qt * kTileRows;
  const ScoreTile t{i0, 0, std::min(kTileRows, Sq - i0), Sk, Sk};
  unfused_scores(x, t, op_.q + i0 * x.dim, op_.kt.data(), w.s.data(), w.gf.data(),
                 causal_key_end(*x.params, t));
  if (last_ >= TileStage::p) unfused_softmax(x, t, w.s.data(), w.p.data(), w.m.data(), w.l.data());
  if (last_ >= TileStage::dp) {
    times_transposed(t.rows, Sk, Sk, x.dim_v, op_.dout + i0 * x.dim_v, op_.vt.data(), w.dp.data());
    unfused_softmax_backward(x, t, w.p.data(), w.dp.data(), w.d.data(), w.ds.data());
  }
  fn({t, w.s.data(), last_ >= TileStage::p ? w.p.data() : nullptr,
      last_ >= TileStage::dp ? w.dp.data() : nullptr,
      last_ >= TileStage::ds ? w.ds.data() : nullptr});
}

}  // namespace attnscope::cpu
