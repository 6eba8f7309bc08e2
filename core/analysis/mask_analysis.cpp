// Row-by-row masking analysis: visible keys, fully masked rows, overflowing sentinels.
#include "core/analysis/mask_analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/precision.h"

namespace attnscope {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

// True when a finite value becomes -inf once stored in the precision (f64 never rounds).
bool rounds_to_neg_inf(double value, Precision p) {
  if (!std::isfinite(value) || p == Precision::f64) return false;
  return round_to(p, static_cast<float>(value)) == -std::numeric_limits<float>::infinity();
}

RowMask classify(int64_t visible, int64_t sentinel) {
  if (visible > 0) return RowMask::open;
  return sentinel > 0 ? RowMask::sentinel : RowMask::hard;
}

// Rows of head slice (b, h): visible keys and class; returns the fill-masked entries.
int64_t scan_head(const AttnParams& p, int64_t b, int64_t h, int32_t* visible, RowMask* cls) {
  int64_t fill_masked = 0;
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    int64_t vis = 0, sentinel = 0;
    for (int64_t j = 0; j < p.seqlen_k; ++j) {
      if (is_masked(p, b, h, i, j)) {
        ++fill_masked;
        continue;
      }
      const double bias = bias_at(p, b, h, i, j);
      if (bias == kNegInf) continue;
      if (bias <= kBiasSentinel) {
        ++sentinel;
      } else {
        ++vis;
      }
    }
    visible[i] = static_cast<int32_t>(vis);
    cls[i] = classify(vis, sentinel);
  }
  return fill_masked;
}

// Causal masking alone: row i sees keys [0, i + shift].
int64_t causal_head(const AttnParams& p, int32_t* visible, RowMask* cls) {
  int64_t fill_masked = 0;
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    int64_t vis = p.seqlen_k;
    if (p.causal) vis = std::clamp<int64_t>(i + causal_shift(p) + 1, 0, p.seqlen_k);
    fill_masked += p.seqlen_k - vis;
    visible[i] = static_cast<int32_t>(vis);
    cls[i] = classify(vis, 0);
  }
  return fill_masked;
}

// Finite bias entries rounding to -inf, per distinct (batch, head) slice of the bias.
std::vector<BiasOverflow> bias_overflows(const AttnParams& p) {
  std::vector<BiasOverflow> out;
  if (p.bias == nullptr) return out;
  const BroadcastStrides& st = p.bias_strides;
  const int64_t nb = st.b ? p.batch : 1, nh = st.h ? p.heads : 1;
  const int64_t nq = st.q ? p.seqlen_q : 1, nk = st.k ? p.seqlen_k : 1;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      BiasOverflow o;
      o.batch = st.b ? b : -1;
      o.head = st.h ? h : -1;
      for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j = 0; j < nk; ++j) {
          const double v = p.bias[b * st.b + h * st.h + i * st.q + j * st.k];
          if (!rounds_to_neg_inf(v, p.precision)) continue;
          ++o.count;
          o.min_value = std::min(o.min_value, v);
          o.rows = o.rows.merged(nq == 1 ? IndexRange{0, p.seqlen_q - 1} : IndexRange{i, i});
          o.cols = o.cols.merged(nk == 1 ? IndexRange{0, p.seqlen_k - 1} : IndexRange{j, j});
        }
      }
      // A broadcast dim repeats each entry over the whole of it.
      o.count *= (nq == 1 ? p.seqlen_q : 1) * (nk == 1 ? p.seqlen_k : 1);
      if (o.count > 0) out.push_back(o);
    }
  }
  return out;
}

}  // namespace

MaskInfo analyze_masks(const AttnParams& p) {
  MaskInfo info;
  info.any_masking = p.mask != nullptr || p.causal || p.bias != nullptr;
  const int64_t H = p.heads, Sq = p.seqlen_q;
  info.visible.assign(at(p.batch * H * Sq), 0);
  info.row_mask.assign(at(p.batch * H * Sq), RowMask::open);
  // Heads are scanned once when neither the mask nor the bias varies over them.
  const bool per_head =
      (p.mask != nullptr && p.mask_strides.h != 0) || (p.bias != nullptr && p.bias_strides.h != 0);
  const bool closed_form = p.mask == nullptr && p.bias == nullptr;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < (per_head ? H : 1); ++h) {
      const size_t row0 = at((b * H + h) * Sq);
      int32_t* vis = info.visible.data() + row0;
      RowMask* cls = info.row_mask.data() + row0;
      const int64_t filled = closed_form ? causal_head(p, vis, cls) : scan_head(p, b, h, vis, cls);
      info.fill_masked_entries += per_head ? filled : filled * H;
      for (int64_t copy = 1; !per_head && copy < H; ++copy) {
        std::copy(vis, vis + Sq, vis + copy * Sq);
        std::copy(cls, cls + Sq, cls + copy * Sq);
      }
    }
  }
  info.fully_masked_rows = std::count_if(info.row_mask.begin(), info.row_mask.end(),
                                         [](RowMask m) { return m != RowMask::open; });
  info.fill_value = mask_fill_value(p.mask_fill, p.precision);
  info.fill_overflows = rounds_to_neg_inf(info.fill_value, p.precision);
  info.bias_overflow = bias_overflows(p);
  return info;
}

}  // namespace attnscope
