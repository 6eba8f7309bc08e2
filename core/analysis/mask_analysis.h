// What masking does to every query row of a case, independent of any kernel: which keys stay
// visible, which rows attend to nothing, finite bias sentinels that round to -inf in the
// precision, and mask fill values the precision cannot represent (DESIGN §3 masks).
#pragma once

#include <cstdint>
#include <vector>

#include "core/analysis/finding.h"
#include "kernels/attn_params.h"

namespace attnscope {

// How a query row is masked.
enum class RowMask : uint8_t {
  open,      // at least one visible key
  hard,      // every key hidden by the bool mask, causality or a -inf bias
  sentinel,  // every key hidden, some only by a finite sentinel bias (<= kBiasSentinel)
};

// Finite bias entries of one (batch, head slice) of the bias that round to -inf in the precision.
struct BiasOverflow {
  int64_t batch = -1, head = -1;  // -1 when the bias broadcasts over that dim
  int64_t count = 0;
  double min_value = 0;  // most negative such entry
  IndexRange rows, cols;
};

struct MaskInfo {
  bool any_masking = false;  // mask, causal or bias present
  // Per query row (b, h, i), shapes [B, H, Sq]:
  std::vector<int32_t> visible;  // keys not hidden (and bias above the sentinel level)
  std::vector<RowMask> row_mask;
  int64_t fully_masked_rows = 0;  // rows whose row_mask is not open
  // Entries hidden by the bool mask or causality (they hold the fill value), over [B, H, Sq, Sk].
  int64_t fill_masked_entries = 0;
  // The fill value of the policy at the precision, and whether rounding it to the precision
  // (as the unfused kernel does) turns it into -inf although it is finite.
  double fill_value = 0;
  bool fill_overflows = false;
  std::vector<BiasOverflow> bias_overflow;  // slices holding such entries

  RowMask row(int64_t b, int64_t h, int64_t i, int64_t heads, int64_t seqlen_q) const {
    return row_mask[static_cast<size_t>((b * heads + h) * seqlen_q + i)];
  }
};

// params.precision decides the fill value and which bias entries overflow. Cost: one pass
// over [B, H|1, Sq, Sk] (heads once when mask and bias broadcast over them); closed form
// for causal-only cases.
MaskInfo analyze_masks(const AttnParams& params);

}  // namespace attnscope
