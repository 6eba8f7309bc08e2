// The keys of compute_head's stage products (head_compute.h): each names what its product
// depends on and extends the key of the stage it reads, so a change of the request invalidates
// exactly the stages after the part that changed. Compared with ==; a double compares equal only
// to the same value (resolve_scale never gives NaN).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/analysis/clipping.h"  // ClipScope
#include "core/view/head_stages.h"   // GridPlan
#include "kernels/attn_params.h"     // Precision, MaskFill, Mode

namespace attnscope {

// The case's inputs: what make_case_inputs turns into the params (not the scale: a scale
// change keeps them).
struct InputsKey {
  std::optional<Precision> precision;
  std::optional<MaskFill> mask_fill;
};
// + the (batch, head) cut out of them.
struct HeadKey {
  InputsKey inputs;
  int64_t batch = 0, head = 0;
};
// + the softmax scale: the fp64 reference of the head.
struct ScaledKey {
  HeadKey head;
  double scale = 0;
};
// + the mode: the CPU kernel's statistics, forward and backward.
struct KernelKey {
  ScaledKey scaled;
  Mode mode = Mode::fused;
};
// + the window and its pooling: one score grid.
struct GridsKey {
  KernelKey kernel;
  GridPlan plan;
};
// + the registry variant that gives O, LSE and the gradients ("" = the CPU kernel).
struct BackendKey {
  KernelKey kernel;
  std::string backend;
};
// The gradients of the whole case a clip covers: every head, so not the head's key.
struct CaseGradsKey {
  InputsKey inputs;
  double scale = 0;
  Mode mode = Mode::fused;
  std::string backend;
};
// + the clip calls over them.
struct CaseClipsKey {
  CaseGradsKey grads;
  double max_norm = 0;
  ClipScope scope = ClipScope::whole_case;
};

inline bool operator==(const InputsKey& a, const InputsKey& b) {
  return a.precision == b.precision && a.mask_fill == b.mask_fill;
}
inline bool operator==(const HeadKey& a, const HeadKey& b) {
  return a.inputs == b.inputs && a.batch == b.batch && a.head == b.head;
}
inline bool operator==(const ScaledKey& a, const ScaledKey& b) {
  return a.head == b.head && a.scale == b.scale;
}
inline bool operator==(const KernelKey& a, const KernelKey& b) {
  return a.scaled == b.scaled && a.mode == b.mode;
}
inline bool operator==(const GridPlan& a, const GridPlan& b) {
  return a.window == b.window && a.full == b.full && a.rows == b.rows && a.cols == b.cols;
}
inline bool operator==(const GridsKey& a, const GridsKey& b) {
  return a.kernel == b.kernel && a.plan == b.plan;
}
inline bool operator==(const BackendKey& a, const BackendKey& b) {
  return a.kernel == b.kernel && a.backend == b.backend;
}
inline bool operator==(const CaseGradsKey& a, const CaseGradsKey& b) {
  return a.inputs == b.inputs && a.scale == b.scale && a.mode == b.mode && a.backend == b.backend;
}
inline bool operator==(const CaseClipsKey& a, const CaseClipsKey& b) {
  return a.grads == b.grads && a.max_norm == b.max_norm && a.scope == b.scope;
}
inline bool operator!=(const InputsKey& a, const InputsKey& b) {
  return !(a == b);
}
inline bool operator!=(const HeadKey& a, const HeadKey& b) {
  return !(a == b);
}
inline bool operator!=(const ScaledKey& a, const ScaledKey& b) {
  return !(a == b);
}
inline bool operator!=(const KernelKey& a, const KernelKey& b) {
  return !(a == b);
}
inline bool operator!=(const GridsKey& a, const GridsKey& b) {
  return !(a == b);
}
inline bool operator!=(const BackendKey& a, const BackendKey& b) {
  return !(a == b);
}
inline bool operator!=(const CaseGradsKey& a, const CaseGradsKey& b) {
  return !(a == b);
}
inline bool operator!=(const CaseClipsKey& a, const CaseClipsKey& b) {
  return !(a == b);
}

}  // namespace attnscope
