// Replay as recorded (DESIGN §3): the kernel semantics that reproduce what the user's run did,
// derived from the run record a dump carries (schema 1.1: framework version, SDPA backend,
// autocast, dropout), with documented defaults where the dump says nothing.
#pragma once

#include <string>
#include <vector>

#include "core/case_model.h"
#include "kernels/attn_params.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

// How the run's attention dropout can be replayed.
enum class DropoutReplay : uint8_t {
  none,         // no dropout (dropout_p = 0)
  mask,         // the keep-mask is in the dump: replayed exactly
  unavailable,  // dropout without a keep-mask: the outputs cannot be reproduced element-wise
};

struct Replay {
  // The dump names the backend that ran (schema 1.1); otherwise every mode is a candidate.
  bool backend_known = false;
  // The kernel semantics the run had: one mode for a known backend; fused and unfused when
  // unknown (the user may have run either a fused kernel or eager attention).
  std::vector<Mode> modes;
  // SDPA MATH on CPU: fp16 / bf16 inputs are upcast, computed in fp32 and O and the gradients
  // rounded once to `precision` (the fused mode at fp32, outputs rounded).
  bool upcast = false;
  Precision precision = Precision::f32;  // what the run's kernel stored in
  // What masked scores and fully masked rows did: safe (O = 0, zero gradients) for PyTorch
  // >= 2.5's SDPA, -inf (NaN rows) before and when the framework is unknown.
  MaskFill mask_fill = MaskFill::neg_inf;
  // FlashAttention-family backends recompute P from the stored LSE in the backward.
  BackwardP backward_p = BackwardP::saved;
  DropoutReplay dropout = DropoutReplay::none;
  // mask_convention = masked_out: the stored bool mask says True = masked out.
  bool invert_mask = false;
  // A FlexAttention score_mod the kernels cannot replay (score_mod_replay = "unavailable"):
  // no recorded output can be compared.
  bool score_mod_unavailable = false;
  // PyTorch's CPU flash backward at fp16 / bf16 keeps dQ, dK, dV in the stored precision and
  // adds each block's partial product to them (stored_roundings).
  bool gradients_accumulate_stored = false;
  // What replay_of took from the analysis' inference instead of the dump (RunRecord::inferred).
  InferredRun inferred;
  // Every recorded output can be compared element-wise.
  bool exact() const { return dropout != DropoutReplay::unavailable && !score_mod_unavailable; }
  // One line for reports: "sdpa_flash, torch 2.11.0+cu130, fp16: fully masked rows give 0".
  std::string text;
};

// The replay of a case from its group attributes; `keep_mask` says whether the case holds a
// dropout_mask (CaseData::find / CaseInfo::has).
Replay replay_of(const CaseConfig& config, bool keep_mask);

// How many times the recorded kernel rounded recorded tensor `name` ("o", "lse", "dq", "dk",
// "dv") to the stored precision: once, or under gradients_accumulate_stored once per block it
// added, as PyTorch's CPU flash backward blocks them: dQ per 512 keys, dK and dV per 32, 64 or
// 256 query rows (Sq < 192, < 768, longer) of each of the `group` query heads that share the
// kv head.
int64_t stored_roundings(const Replay& r, const std::string& name, int64_t seqlen_q,
                         int64_t seqlen_k, int64_t group);

// What rows that attend to no key give under `fill`: "fully masked rows give O = 0" (safe),
// "... give NaN" (-inf), "... attend uniformly" (a finite fill).
std::string fully_masked_rows_text(MaskFill fill);

// Major and minor version of a "2.11.0+cu130"-style version string; {0, 0} when unparsable.
std::pair<int, int> framework_version(const std::string& text);

// True for the backends that recompute P from the LSE (FlashAttention-2/3, PyTorch's CPU
// flash, mem-efficient, cuDNN, FlexAttention, xFormers): "sdpa_flash", "flash_attn", ...
bool is_fused_backend(const std::string& backend);

}  // namespace attnscope
