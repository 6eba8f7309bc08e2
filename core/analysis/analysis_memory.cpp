// analysis_bytes (see analysis_memory.h).
#include "core/analysis/analysis_memory.h"

#include <algorithm>

#include "core/memory_budget.h"

namespace attnscope {

namespace {

int64_t add(std::initializer_list<int64_t> terms) {
  int64_t total = 0;
  for (int64_t t : terms) {
    if (__builtin_add_overflow(total, t, &total)) return INT64_MAX;
  }
  return total;
}

}  // namespace

int64_t analysis_bytes(const CaseDims& d, int64_t extra_elements, int64_t runs, bool recorded) {
  const int64_t eq = saturating_product({d.batch, d.heads, d.seqlen_q, d.head_dim});
  const int64_t eo = saturating_product({d.batch, d.heads, d.seqlen_q, d.head_dim_v});
  const int64_t ek = saturating_product({d.batch, d.kv_heads, d.seqlen_k, d.head_dim});
  const int64_t ev = saturating_product({d.batch, d.kv_heads, d.seqlen_k, d.head_dim_v});
  const int64_t rows = saturating_product({d.batch, d.heads, d.seqlen_q});
  const int64_t tensors = add({eq, eo, ek, ev});
  const int64_t inputs = saturating_product({8, extra_elements});
  const int64_t run = add({saturating_product({4, tensors}), saturating_product({32, rows})});
  const int64_t reference = saturating_product({8, add({tensors, saturating_product({3, rows})})});
  const int64_t head =
      saturating_product({std::max(d.seqlen_q, d.seqlen_k), std::max(d.head_dim, d.head_dim_v)});
  const int64_t compared = recorded ? saturating_product({16, head}) : 0;
  return add({inputs, saturating_product({std::max<int64_t>(runs, 1), run}), reference, compared});
}

}  // namespace attnscope
