// Names of the kernels' enums (see attn_names.h).
#include "kernels/attn_names.h"

namespace attnscope {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::f64:
      return "fp64";
    case Precision::f32:
      return "fp32";
    case Precision::f16:
      return "fp16";
    case Precision::bf16:
      return "bf16";
  }
  return "unknown";
}

const char* mask_fill_name(MaskFill fill) {
  switch (fill) {
    case MaskFill::neg_inf:
      return "neg_inf";
    case MaskFill::neg_1e9:
      return "-1e9";
    case MaskFill::finfo_min:
      return "finfo_min";
    case MaskFill::safe:
      return "safe";
  }
  return "unknown";
}

const char* mask_fill_label(MaskFill fill) {
  switch (fill) {
    case MaskFill::neg_inf:
      return "-inf";
    case MaskFill::neg_1e9:
      return "-1e9";
    case MaskFill::finfo_min:
      return "finfo.min";
    case MaskFill::safe:
      return "safe";
  }
  return "unknown";
}

const char* causal_align_name(CausalAlign a) {
  switch (a) {
    case CausalAlign::top_left:
      return "top_left";
    case CausalAlign::bottom_right:
      return "bottom_right";
  }
  return "unknown";
}

const char* backward_p_name(BackwardP b) {
  switch (b) {
    case BackwardP::saved:
      return "saved";
    case BackwardP::from_lse:
      return "from_lse";
  }
  return "unknown";
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::fused:
      return "fused";
    case Mode::unfused:
      return "unfused";
  }
  return "unknown";
}

const char* provenance_name(Provenance p) {
  switch (p) {
    case Provenance::finite:
      return "finite";
    case Provenance::input:
      return "input";
    case Provenance::score_overflow:
      return "score_overflow";
    case Provenance::mask_fill:
      return "mask_fill";
    case Provenance::fully_masked_row:
      return "fully_masked_row";
    case Provenance::exp_overflow:
      return "exp_overflow";
    case Provenance::lse:
      return "lse";
    case Provenance::grad_overflow:
      return "grad_overflow";
    case Provenance::propagated:
      return "propagated";
  }
  return "unknown";
}

const char* cell_class_name(CellClass cls) {
  switch (cls) {
    case CellClass::finite:
      return "finite";
    case CellClass::nan:
      return "NaN";
    case CellClass::pos_inf:
      return "+inf";
    case CellClass::neg_inf:
      return "-inf";
    case CellClass::masked:
      return "masked";
  }
  return "unknown";
}

const char* step_stage_name(StepStage stage) {
  switch (stage) {
    case StepStage::start:
      return "start";
    case StepStage::backward_preprocess:
      return "backward_preprocess";
    case StepStage::score_tile:
      return "score_tile";
    case StepStage::mask_tile:
      return "mask_tile";
    case StepStage::recompute_p:
      return "recompute_p";
    case StepStage::accumulate_dv:
      return "accumulate_dv";
    case StepStage::compute_dp:
      return "compute_dp";
    case StepStage::compute_ds:
      return "compute_ds";
    case StepStage::accumulate_dq:
      return "accumulate_dq";
    case StepStage::accumulate_dk:
      return "accumulate_dk";
    case StepStage::store_dk_dv:
    case StepStage::store_dq:
      return "backward_postprocess";
  }
  return "unknown";
}

}  // namespace attnscope
