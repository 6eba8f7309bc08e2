// Turns a loaded case (canonical tensors + config) and the user's what-if settings into the
// AttnParams and input buffers every kernel variant takes.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/case_model.h"
#include "core/result.h"
#include "kernels/attn_params.h"

namespace attnscope {

// What-if settings that change how a case is recomputed (DESIGN §5 controls).
struct RunSettings {
  std::optional<double> scale;  // absent: the case's scale attribute, else 1/sqrt(D)
  std::optional<Precision> precision;  // absent: the case's dtype attribute, else f32
  MaskFill mask_fill = MaskFill::neg_inf;
};

// Owns the converted inputs; params' mask / bias pointers point into this object, so it moves
// but never copies. Shapes follow the AttnParams layout contract.
struct CaseInputs {
  AttnParams params;
  std::vector<double> q, k, v;  // [B,H,Sq,D], [B,Hk,Sk,D], [B,Hk,Sk,Dv]: exact stored values
  std::vector<double> dout;     // [B,H,Sq,Dv]; empty when the case has no dO (dO = 1)
  std::vector<uint8_t> mask;    // canonical mask, 1 = attend; empty when absent
  std::vector<double> bias;     // canonical bias; empty when absent
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
const char* precision_name(Precision p);  // "fp64", "fp32", "fp16", "bf16"

// The softmax scale a run uses: the override, else the case's attribute, else 1/sqrt(D). Fails
// (invalid_argument) when it is not a positive finite number.
Result<double> resolve_scale(const CaseData& data, const RunSettings& settings);

// Fails (invalid_argument) on a non-finite or non-positive scale override or a mask / bias
// that is not broadcastable (the readers already validated shapes, so this guards the API).
Result<CaseInputs> make_case_inputs(const CaseData& data, const RunSettings& settings);

}  // namespace attnscope
