// End of a traced run (see trace_recorder.h): resolves the per-row and per-kv-tile cause flags
// into one provenance code per non-finite output element, and computes the gradient norms.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/cpu/parallel_for.h"
#include "kernels/cpu/tile_math.h"
#include "kernels/cpu/trace_recorder.h"

namespace attnscope::cpu {
namespace {

size_t count(int64_t n) {
  return static_cast<size_t>(n);
}

// One gradient tensor x [heads * rows_per_head x dim] of finish_backward: its row norms, the
// norm of each head (its rows' squares summed in row order), and a code for every non-finite
// entry of row i of head `head`: code(head, i). The codes are made only when some entry is not
// finite (prov stays empty otherwise): norms() first, then codes() of the heads it flagged.
struct GradNorms {
  const float* x;
  int64_t heads, rows_per_head, dim;
  std::vector<float>& row_norm;
  std::vector<double>& head_norm;
  std::vector<Provenance>& prov;
  std::function<Provenance(int64_t head, int64_t i)> code;

  void size(std::vector<uint8_t>& head_bad) const {
    row_norm.resize(count(heads * rows_per_head));
    head_norm.resize(count(heads));
    head_bad.assign(count(heads), 0);
  }

  // Row and head norms of head h; head_bad[h] = 1 when a row of it is not finite.
  void norms(int64_t h, std::vector<uint8_t>& head_bad) const {
    const int64_t row0 = h * rows_per_head;
    double total = 0;
    for (int64_t i = 0; i < rows_per_head; ++i) {
      const double sq = sum_squares(x + (row0 + i) * dim, dim);
      row_norm[count(row0 + i)] = static_cast<float>(std::sqrt(sq));
      total += sq;
      // A NaN or inf entry makes the sum of squares one.
      if (!std::isfinite(sq)) head_bad[count(h)] = 1;
    }
    head_norm[count(h)] = std::sqrt(total);
  }

  // The codes of head h's non-finite entries (prov sized and set to finite before).
  void codes(int64_t h) const {
    for (int64_t i = 0; i < rows_per_head; ++i) {
      const int64_t row = h * rows_per_head + i;
      if (std::isfinite(row_norm[count(row)])) continue;
      const Provenance c = code(h, i);
      const float* x_r = x + row * dim;
      for (int64_t e = 0; e < dim; ++e) {
        if (!std::isfinite(x_r[e])) prov[count(row * dim + e)] = c;
      }
    }
  }
};

// Below this many gradient entries in all, finish_backward runs on the calling thread: a
// worker's start costs more than it saves.
constexpr int64_t kParallelNormEntries = int64_t{1} << 16;

}  // namespace

Provenance TraceRecorder::row_cause(int64_t bh, int64_t i, bool backward) const {
  const size_t row = count(bh * prm_.seqlen_q + i);
  const int64_t bkv = (bh / prm_.heads) * prm_.kv_heads + prm_.kv_head_of(bh % prm_.heads);
  const uint8_t f = row_flags_[row];
  // O_i reads every v_j (0 * NaN) but only the visible k_j (masked scores are replaced);
  // dQ_i = scale * sum_j dS_ij k_j reads every k_j as well.
  const bool kv_bad = v_head_bad_[count(bkv)] || (backward && k_head_bad_[count(bkv)]);
  const bool inputs_bad = q_bad_[row] || kv_bad || (backward && dout_bad_[row]);
  const float m = backward ? row_m_[row] : trace_.forward.m[row];
  return row_provenance(f, inputs_bad, m == -std::numeric_limits<float>::infinity(),
                        Provenance::finite);
}

void TraceRecorder::finish_forward(const CpuForwardOutputs& out) {
  ForwardTrace& f = trace_.forward;
  const int64_t Sq = prm_.seqlen_q, Dv = prm_.head_dim_v;
  const int64_t rows = prm_.batch * prm_.heads * Sq;
  f.m.assign(out.m, out.m + rows);
  f.l.assign(out.l, out.l + rows);
  f.lse.assign(out.lse, out.lse + rows);
  f.o_max_abs.resize(count(rows));
  f.o_provenance.clear();
  f.lse_provenance.clear();
  // Each row's largest magnitude in one pass per head: its max |O_i| unless not finite; then,
  // only when some O or LSE entry is not finite, the codes of the heads that hold one.
  std::vector<uint8_t> head_bad(count(prm_.batch * prm_.heads), 0);
  const int64_t o_bytes = rows * Dv * int64_t{sizeof(float)};
  const int threads = streaming_threads(threads_, o_bytes);
  parallel_for(prm_.batch * prm_.heads, threads, [&](int64_t bh, int) {
    float* o_max_abs = f.o_max_abs.data() + bh * Sq;
    row_maxima(Precision::f32, out.o + bh * Sq * Dv, Sq, Dv, o_max_abs);
    for (int64_t i = 0; i < Sq; ++i) {
      const int64_t row = bh * Sq + i;
      const bool o_bad = !magnitude_finite(o_max_abs[i]);
      float max = 0;
      if (o_bad) finite_max(out.o + row * Dv, Dv, &o_max_abs[i], &max);
      if (o_bad || !std::isfinite(out.lse[row])) head_bad[count(bh)] = 1;
    }
  });
  if (std::none_of(head_bad.begin(), head_bad.end(), [](uint8_t b) { return b != 0; })) {
    f.valid = true;
    return;
  }
  f.o_provenance.assign(count(rows * Dv), Provenance::finite);
  f.lse_provenance.assign(count(rows), Provenance::finite);
  parallel_for(prm_.batch * prm_.heads, threads, [&](int64_t bh, int) {
    if (head_bad[count(bh)] == 0) return;
    for (int64_t i = 0; i < Sq; ++i) {
      const int64_t row = bh * Sq + i;
      const float* o_r = out.o + row * Dv;
      const bool o_bad = std::any_of(o_r, o_r + Dv, [](float v) { return !std::isfinite(v); });
      const bool lse_bad = !std::isfinite(out.lse[row]);
      if (!o_bad && !lse_bad) continue;
      const Provenance cause = row_cause(bh, i, false);
      const bool known = cause != Provenance::finite;
      for (int64_t c = 0; o_bad && c < Dv; ++c) {
        if (!std::isfinite(o_r[c])) {
          f.o_provenance[count(row * Dv + c)] = known ? cause : Provenance::propagated;
        }
      }
      if (lse_bad) f.lse_provenance[count(row)] = known ? cause : Provenance::lse;
    }
  });
  f.valid = true;
}

void TraceRecorder::finish_backward(const CpuBackwardOutputs& out) {
  BackwardTrace& bw = trace_.backward;
  const int64_t H = prm_.heads, Hk = prm_.kv_heads, Sq = prm_.seqlen_q, Sk = prm_.seqlen_k;
  const int64_t D = prm_.head_dim, Dv = prm_.head_dim_v;
  bw.d.assign(out.d, out.d + prm_.batch * H * Sq);
  // dQ_i: the cause found on row i; otherwise only the backward's range can have produced it.
  const auto dq_code = [&](int64_t bh, int64_t i) {
    const Provenance cause = row_cause(bh, i, true);
    return cause != Provenance::finite ? cause : Provenance::grad_overflow;
  };
  // dK_j, dV_j: their own k_j / v_j, else a poisoned row reaching their kv tile, else born in
  // their own gradient stages or accumulators.
  const auto kv_code = [&](int64_t bkv, int64_t j) {
    const int64_t row = bkv * Sk + j;
    if (!magnitude_finite(in_.k_max[count(row)]) || !magnitude_finite(in_.v_max[count(row)])) {
      return Provenance::input;
    }
    const uint8_t col = col_flags_[count(bkv * n_kv_ + j / kTileCols)];
    return (col & kColArrived) != 0 ? Provenance::propagated : Provenance::grad_overflow;
  };
  const int64_t BH = prm_.batch * H, BHk = prm_.batch * Hk;
  const GradNorms grads[] = {
      {out.dq, BH, Sq, D, bw.dq_row_norm, bw.dq_head_norm, bw.dq_provenance, dq_code},
      {out.dk, BHk, Sk, D, bw.dk_row_norm, bw.dk_head_norm, bw.dk_provenance, kv_code},
      {out.dv, BHk, Sk, Dv, bw.dv_row_norm, bw.dv_head_norm, bw.dv_provenance, kv_code}};
  std::vector<uint8_t> head_bad[3];
  for (int g = 0; g < 3; ++g) grads[g].size(head_bad[g]);
  // One item per head of each tensor, in one parallel pass (dQ's heads first); then the codes
  // of the heads holding a non-finite entry, in tensors that have one.
  const int64_t entries = BH * Sq * D + BHk * Sk * (D + Dv);
  const int threads = entries < kParallelNormEntries ? 1 : threads_;
  const auto tensor_of = [&](int64_t item) { return item < BH ? 0 : 1 + (item - BH) / BHk; };
  const auto head_of = [&](int64_t item) { return item < BH ? item : (item - BH) % BHk; };
  parallel_for(BH + 2 * BHk, threads, [&](int64_t item, int) {
    const int64_t g = tensor_of(item);
    grads[g].norms(head_of(item), head_bad[g]);
  });
  for (int g = 0; g < 3; ++g) {
    const bool any =
        std::any_of(head_bad[g].begin(), head_bad[g].end(), [](uint8_t b) { return b != 0; });
    grads[g].prov.clear();
    if (any)
      grads[g].prov.assign(count(grads[g].heads * grads[g].rows_per_head * grads[g].dim),
                           Provenance::finite);
  }
  parallel_for(BH + 2 * BHk, threads, [&](int64_t item, int) {
    const int64_t g = tensor_of(item), h = head_of(item);
    if (head_bad[g][count(h)] != 0) grads[g].codes(h);
  });
  bw.valid = true;
}

}  // namespace attnscope::cpu
