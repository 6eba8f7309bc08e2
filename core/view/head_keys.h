// The keys of compute_head's stage products (head_compute.h): each names what its product
// depends on and extends the key of the stage it reads, so a change of the request invalidates
// exactly the stages after the part that changed. Compared with ==; a double compares equal only
// to the same value (resolve_scale never gives NaN).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "core/analysis/clipping.h"  // ClipScope
#include "core/view/head_stages.h"   // GridPlan
#include "kernels/attn_params.h"     // Precision, MaskFill, Mode

namespace attnscope {

// Each key lists its parts in tie(); keys compare equal when every part does.

// The case's inputs: what make_case_inputs turns into the params (not the scale: a scale
// change keeps them).
struct InputsKey {
  std::optional<Precision> precision;
  std::optional<MaskFill> mask_fill;
  auto tie() const { return std::tie(precision, mask_fill); }
};
// + the (batch, head) cut out of them.
struct HeadKey {
  InputsKey inputs;
  int64_t batch = 0, head = 0;
  auto tie() const { return std::tie(inputs, batch, head); }
};
// + the softmax scale: the fp64 reference of the head.
struct ScaledKey {
  HeadKey head;
  double scale = 0;
  auto tie() const { return std::tie(head, scale); }
};
// + the mode: the CPU kernel's statistics, forward and backward.
struct KernelKey {
  ScaledKey scaled;
  Mode mode = Mode::fused;
  auto tie() const { return std::tie(scaled, mode); }
};
// + the window and its pooling: one score grid.
struct GridsKey {
  KernelKey kernel;
  GridPlan plan;
  auto tie() const { return std::tie(kernel, plan.window, plan.full, plan.rows, plan.cols); }
};
// + the registry variant that gives O, LSE and the gradients ("" = the CPU kernel).
struct BackendKey {
  KernelKey kernel;
  std::string backend;
  auto tie() const { return std::tie(kernel, backend); }
};
// The gradients of the whole case a clip covers: every head, so not the head's key.
struct CaseGradsKey {
  InputsKey inputs;
  double scale = 0;
  Mode mode = Mode::fused;
  std::string backend;
  auto tie() const { return std::tie(inputs, scale, mode, backend); }
};
// + the clip calls over them.
struct CaseClipsKey {
  CaseGradsKey grads;
  double max_norm = 0;
  ClipScope scope = ClipScope::whole_case;
  auto tie() const { return std::tie(grads, max_norm, scope); }
};

template <typename Key, typename = decltype(std::declval<const Key&>().tie())>
bool operator==(const Key& a, const Key& b) {
  return a.tie() == b.tie();
}
template <typename Key, typename = decltype(std::declval<const Key&>().tie())>
bool operator!=(const Key& a, const Key& b) {
  return !(a == b);
}

}  // namespace attnscope
