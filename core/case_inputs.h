// Turns a loaded case (canonical tensors + config) and a run choice (its scale, precision and
// mask fill; core/run_choice.h) into the AttnParams and input buffers every kernel variant takes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/case_model.h"
#include "core/result.h"
#include "core/run_choice.h"
#include "kernels/attn_names.h"  // precision_name, mask_fill_name
#include "kernels/attn_params.h"

namespace attnscope {

// Owns the converted inputs; params' mask / bias pointers point into this object, so it moves
// but never copies. Shapes follow the AttnParams layout contract.
struct CaseInputs {
  AttnParams params;
  std::vector<double> q, k, v;        // [B,H,Sq,D], [B,Hk,Sk,D], [B,Hk,Sk,Dv]: exact stored values
  std::vector<double> dout;           // [B,H,Sq,Dv]; empty when the case has no dO (dO = 1)
  std::vector<uint8_t> mask;          // canonical mask, 1 = attend; empty when absent
  std::vector<double> bias;           // canonical bias; empty when absent
  std::vector<uint8_t> dropout_keep;  // canonical dropout keep-mask, 1 = kept; empty when absent
  bool has_dout = false;

  CaseInputs() = default;
  CaseInputs(CaseInputs&&) = default;
  CaseInputs& operator=(CaseInputs&&) = default;
  CaseInputs(const CaseInputs&) = delete;
  CaseInputs& operator=(const CaseInputs&) = delete;

  // fp32 copies for the CPU kernels (exact when the case was stored in f16/bf16/f32).
  std::vector<float> q_f32() const;
  std::vector<float> k_f32() const;
  std::vector<float> v_f32() const;
  std::vector<float> dout_f32() const;
};

// Precision named by a dtype attribute ("float16", "bfloat16", "float32", "float64").
std::optional<Precision> precision_from_dtype(const std::string& dtype);
// A cache-key number of a mask fill setting: the enum value, -1 for "as recorded".
inline int fill_key(const std::optional<MaskFill>& fill) {
  return fill ? static_cast<int>(*fill) : -1;
}

// The softmax scale a run uses: the choice's, else the case's attribute, else 1/sqrt(D). Fails
// (invalid_argument) when it is not a positive finite number.
Result<double> resolve_scale(const CaseData& data, const RunChoice& choice);

// Inputs for the choice's scale, precision and mask fill (its modes, backend and clip are for
// the callers that run kernels). Fails (invalid_argument) on a non-finite or non-positive scale
// or a mask / bias / dropout mask that is not broadcastable (the readers already validated
// shapes, so this guards the API). The run semantics the choice leaves open come from
// replay_of (core/replay.h): mask fill, precision, the backward's P source, the dropout
// keep-mask, the mask's polarity.
Result<CaseInputs> make_case_inputs(const CaseData& data, const RunChoice& choice);

}  // namespace attnscope
