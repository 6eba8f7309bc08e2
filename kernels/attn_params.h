// The one parameter struct shared by every attention kernel (reference, CPU, CUDA; forward
// and backward): sizes, softmax scale, masking, dropout, the backward's source of P and the
// emulated precision.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace attnscope {

// Precision a kernel emulates. f64 is the reference; f32/f16/bf16 round where DESIGN §3 says.
enum class Precision : uint8_t { f64, f32, f16, bf16 };

// Which query/key diagonal "causal" refers to when Sq != Sk.
//   top_left:     key j visible to query i iff j <= i                 (PyTorch SDPA)
//   bottom_right: key j visible to query i iff j <= i + (Sk - Sq)     (FlashAttention >= 2.1)
enum class CausalAlign : uint8_t { top_left, bottom_right };

// What a masked-out score becomes (masked_fill value). `safe` keeps -inf but makes a fully
// masked row produce O = 0, LSE = -inf and zero gradients (PyTorch >= 2.5 semantics).
enum class MaskFill : uint8_t { neg_inf, neg_1e9, finfo_min, safe };

// Where the backward takes the softmax probabilities P from (the forward is the same).
//   saved:    P = exp(s - m) / l, the forward's own P: autograd of eager attention and of SDPA's
//             MATH backend, which save the softmax output. Exact even when |m| is huge.
//   from_lse: P = exp(s - LSE) recomputed from the stored LSE = m + log l, as FlashAttention-
//             family kernels do (FA2, PyTorch's CPU flash SDPA, mem-efficient, cuDNN). It differs
//             where LSE absorbs log l: a row whose every score is one huge finite sentinel (a
//             finfo.min bias on every key) has LSE = m, so P = 1 on every key instead of 1 / Sk
//             and the row's share of dQ, dK, dV is Sk times the saved one.
// The unfused CPU kernel is eager attention by definition and always uses `saved`.
enum class BackwardP : uint8_t { saved, from_lse };

// Element strides of a tensor broadcast to [B, H, Sq, Sk]; a stride of 0 broadcasts that dim.
struct BroadcastStrides {
  int64_t b = 0, h = 0, q = 0, k = 0;
};

// Layout contract: q [B, H, Sq, D], k [B, Hk, Sk, D], v [B, Hk, Sk, Dv], o / dO [B, H, Sq, Dv],
// lse / m / l / D [B, H, Sq]; all contiguous row-major (BHSD). Query head h reads kv head
// h / (H / Hk) (GQA / MQA). Score pipeline, per (b, h, i, j):
//   s = scale * q_i . k_j;  if softcap > 0: s = softcap * tanh(s / softcap);  s += bias;
//   if (mask says 0) or (causal hides j): s = fill value of mask_fill.
// Then p = softmax_j(s) (m, l, LSE are those of this undropped p), o_i = sum_j p_ij z_ij v_j with
// z the dropout factor (dropout_factor; 1 without a keep-mask). The backward differentiates
// loss = sum dO . o: dv_j = sum_i p_ij z_ij dO_i, dp_ij = z_ij dO_i . v_j (the dP that enters
// dS), D_i = dO_i . o_i = sum_j p_ij dp_ij, ds_ij = p_ij (dp_ij - D_i) (times the softcap
// derivative), dq_i = scale sum_j ds_ij k_j, dk_j = scale sum_i ds_ij q_i.
struct AttnParams {
  int64_t batch = 1;       // B
  int64_t heads = 1;       // H, query heads
  int64_t kv_heads = 1;    // Hk, divides H
  int64_t seqlen_q = 1;    // Sq
  int64_t seqlen_k = 1;    // Sk
  int64_t head_dim = 1;    // D of q and k
  int64_t head_dim_v = 1;  // Dv of v, o and dO

  double scale = 1.0;  // softmax scale, usually 1/sqrt(D)
  double softcap = 0;  // tanh soft-capping of scores; 0 = off
  bool causal = false;
  CausalAlign causal_align = CausalAlign::top_left;
  MaskFill mask_fill = MaskFill::neg_inf;
  Precision precision = Precision::f64;  // also picks finfo.min for MaskFill::finfo_min

  const uint8_t* mask = nullptr;  // optional bool mask, 1 = attend; broadcast by mask_strides
  BroadcastStrides mask_strides;
  const double* bias = nullptr;  // optional additive bias (may hold -inf); by bias_strides
  BroadcastStrides bias_strides;

  // Attention dropout replayed from a known keep-mask (no keep-mask: no dropout; the CPU
  // kernels then reject dropout_p != 0). dropout_p must lie in [0, 1).
  const uint8_t* dropout_keep = nullptr;  // optional, 1 = kept; [B, H, Sq, Sk] by dropout_strides
  BroadcastStrides dropout_strides;
  double dropout_p = 0;  // kept probabilities are scaled by 1 / (1 - dropout_p)
  BackwardP backward_p = BackwardP::saved;

  int64_t group_size() const { return heads / kv_heads; }
  int64_t kv_head_of(int64_t h) const { return h / group_size(); }
};

// Largest finite value of a precision.
inline double finfo_max(Precision p) {
  switch (p) {
    case Precision::f16:
      return 65504.0;
    case Precision::bf16:
      return 3.3895313892515355e38;
    case Precision::f32:
      return static_cast<double>(std::numeric_limits<float>::max());
    case Precision::f64:
      break;
  }
  return std::numeric_limits<double>::max();
}

// Bias entries at or below this are masking sentinels (-1e4 as BERT's extended mask, -1e9,
// finfo.min, -inf), not scores: their positions count as masked.
inline constexpr double kBiasSentinel = -1e4;

// The value a masked-out score is set to, before any rounding to the precision.
inline double mask_fill_value(MaskFill fill, Precision p) {
  switch (fill) {
    case MaskFill::neg_1e9:
      return -1e9;
    case MaskFill::finfo_min:
      return -finfo_max(p);
    case MaskFill::neg_inf:
    case MaskFill::safe:
      break;
  }
  return -std::numeric_limits<double>::infinity();
}

// Causal masking hides key j from query i iff j > i + causal_shift(p): Sk - Sq for bottom-right
// alignment, 0 for top-left.
inline int64_t causal_shift(const AttnParams& p) {
  return p.causal_align == CausalAlign::bottom_right ? p.seqlen_k - p.seqlen_q : 0;
}

// True when causal masking hides key j from query i.
inline bool causal_hides(const AttnParams& p, int64_t i, int64_t j) {
  return p.causal && j > i + causal_shift(p);
}

// True when the bool mask or causality hides key j from query i of (batch b, head h).
inline bool is_masked(const AttnParams& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (causal_hides(p, i, j)) return true;
  if (p.mask == nullptr) return false;
  const BroadcastStrides& st = p.mask_strides;
  return p.mask[b * st.b + h * st.h + i * st.q + j * st.k] == 0;
}

// Additive bias at (b, h, i, j), 0 without a bias.
inline double bias_at(const AttnParams& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (p.bias == nullptr) return 0.0;
  const BroadcastStrides& st = p.bias_strides;
  return p.bias[b * st.b + h * st.h + i * st.q + j * st.k];
}

// True when the dropout keep-mask keeps (b, h, i, j); always true without a keep-mask.
inline bool dropout_keeps(const AttnParams& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (p.dropout_keep == nullptr) return true;
  const BroadcastStrides& st = p.dropout_strides;
  return p.dropout_keep[b * st.b + h * st.h + i * st.q + j * st.k] != 0;
}

// Dropout factor z_ij of (b, h, i, j): 1 without a keep-mask, else 1 / (1 - dropout_p) where
// kept and 0 where dropped.
inline double dropout_factor(const AttnParams& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (p.dropout_keep == nullptr) return 1.0;
  return dropout_keeps(p, b, h, i, j) ? 1.0 / (1.0 - p.dropout_p) : 0.0;
}

}  // namespace attnscope
