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
#include "kernels/cpu/fused_attention.h"  // CpuAttnInputs

namespace attnscope {

// Owns the converted inputs; params' mask / bias pointers point into this object, so it moves
// but never copies. Shapes follow the AttnParams layout contract; q, k, v, dout are empty when
// made with InputValues::none.
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
};

// fp32 copies of a case's q, k, v, dO for the CPU kernels (exact for cases stored in fp16 /
// bf16 / fp32), made from the case itself: the same values whatever the run choice, so the
// kernels need no fp64 copy (make_case_inputs with InputValues::none gives their params).
struct KernelInputs {
  std::vector<float> q, k, v, dout;  // shapes as CaseInputs'; dout empty when the case has none

  explicit KernelInputs(const CaseData& data);
  CpuAttnInputs view() const {
    return {q.data(), k.data(), v.data(), dout.empty() ? nullptr : dout.data()};
  }
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

// What make_case_inputs converts besides the parameters and masks: q, k, v, dO of the whole case
// in fp64 (the kernel variants, the fp64 reference, the findings), or none, for a caller that
// reads one head of them, or fp32 copies, from the case itself (a whole-case fp64 copy of a
// real-size layer is hundreds of MB).
enum class InputValues : uint8_t { fp64, none };

// Inputs for the choice's scale, precision and mask fill (its modes, backend and clip are for
// the callers that run kernels). Fails (invalid_argument) on a non-finite or non-positive scale
// or a mask / bias / dropout mask that is not broadcastable (the readers already validated
// shapes, so this guards the API). The run semantics the choice leaves open come from
// replay_of (core/replay.h): mask fill, precision, the backward's P source, the dropout
// keep-mask, the mask's polarity.
Result<CaseInputs> make_case_inputs(const CaseData& data, const RunChoice& choice,
                                    InputValues values = InputValues::fp64);

}  // namespace attnscope
