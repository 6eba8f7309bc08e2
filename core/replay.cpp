// The replay of a recorded run: backend -> mode and P source, framework version -> fully
// masked row semantics, autocast / dtype -> precision, dropout -> keep-mask replay.
#include "core/replay.h"

#include <algorithm>
#include <cstdio>

#include "core/case_inputs.h"

namespace attnscope {
namespace {

// PyTorch 2.5 made SDPA return 0 (and zero gradients) for rows that attend to no key: the MATH
// backend's _safe_softmax, the flash and mem-efficient kernels alike.
constexpr std::pair<int, int> kSafeSoftmaxSince = {2, 5};

bool is_sdpa_backend(const std::string& backend) {
  return backend.rfind("sdpa_", 0) == 0;
}

bool on_cpu(const RunRecord& run) {
  return run.device.empty() || run.device.rfind("cpu", 0) == 0;
}

}  // namespace

std::string fully_masked_rows_text(MaskFill fill) {
  switch (fill) {
    case MaskFill::safe:
      return "fully masked rows give O = 0";
    case MaskFill::neg_inf:
      return "fully masked rows give NaN";
    default:
      return "fully masked rows attend uniformly";
  }
}

std::pair<int, int> framework_version(const std::string& text) {
  int major = 0, minor = 0;
  if (std::sscanf(text.c_str(), "%d.%d", &major, &minor) != 2) return {0, 0};
  return {major, minor};
}

bool is_fused_backend(const std::string& backend) {
  for (const char* name : {"sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "sdpa_overrideable",
                           "flash_attn", "flex", "xformers"}) {
    if (backend == name) return true;
  }
  return false;
}

int64_t stored_roundings(const Replay& r, const std::string& name, int64_t seqlen_q,
                         int64_t seqlen_k, int64_t group) {
  if (!r.gradients_accumulate_stored) return 1;
  const auto blocks = [](int64_t n, int64_t block) {
    return std::max<int64_t>(1, (n + block - 1) / block);
  };
  if (name == "dq") return blocks(seqlen_k, 512);
  if (name == "dk" || name == "dv") {
    return group * blocks(seqlen_q, seqlen_q >= 768 ? 256 : seqlen_q >= 192 ? 64 : 32);
  }
  return 1;
}

Replay replay_of(const CaseConfig& config, bool keep_mask) {
  const RunRecord& run = config.run;
  Replay r;
  const std::string dtype = run.autocast_dtype.empty() ? config.dtype : run.autocast_dtype;
  r.precision = precision_from_dtype(dtype).value_or(Precision::f32);
  if (r.precision == Precision::f64) r.precision = Precision::f32;  // the kernels emulate fp32
  const bool sdpa = is_sdpa_backend(run.backend);
  const auto version = framework_version(run.torch_version);
  r.mask_fill = sdpa && version >= kSafeSoftmaxSince ? MaskFill::safe : MaskFill::neg_inf;
  if (is_fused_backend(run.backend)) {
    r.backend_known = true;
    r.modes = {Mode::fused};
    r.backward_p = BackwardP::from_lse;
    r.gradients_accumulate_stored =
        run.backend == "sdpa_flash" && on_cpu(run) && r.precision != Precision::f32;
  } else if (run.backend == "sdpa_math") {
    r.backend_known = true;
    // On CPU the MATH backend upcasts fp16 / bf16 to fp32 and rounds its results once; on a
    // GPU it runs op by op in the input precision like eager attention.
    const bool cpu = on_cpu(run);
    r.modes = {cpu ? Mode::fused : Mode::unfused};
    r.upcast = cpu && r.precision != Precision::f32;
  } else if (run.backend == "eager") {  // transformers' eager_attention_forward
    r.backend_known = true;
    r.modes = {Mode::unfused};
  } else {
    r.modes = {Mode::fused, Mode::unfused};
  }
  r.dropout = run.dropout_p <= 0 ? DropoutReplay::none
              : keep_mask        ? DropoutReplay::mask
                                 : DropoutReplay::unavailable;
  r.invert_mask = run.mask_convention == "masked_out";
  r.score_mod_unavailable = run.score_mod_replay == "unavailable";
  r.inferred = run.inferred;
  if (run.inferred.mask_fill) r.mask_fill = *run.inferred.mask_fill;

  const std::string backend = run.backend.empty() ? "backend not recorded" : run.backend;
  const std::string framework =
      run.torch_version.empty() ? "framework not recorded" : "torch " + run.torch_version;
  r.text = backend + ", " + framework + ", " + precision_name(r.precision) +
           (r.upcast ? " computed in fp32" : "") + ": " + fully_masked_rows_text(r.mask_fill) +
           (run.inferred.mask_fill ? " (inferred)" : "");
  if (run.inferred.scale) {
    char scale[32];
    std::snprintf(scale, sizeof scale, "%g", *run.inferred.scale);
    r.text += std::string(", scale ") + scale + " (inferred)";
  }
  if (r.dropout != DropoutReplay::none) {
    char p[32];
    std::snprintf(p, sizeof p, "%g", run.dropout_p);
    r.text += std::string(", dropout p = ") + p +
              (r.dropout == DropoutReplay::mask ? " (keep-mask recorded)" : " (no keep-mask)");
  }
  if (r.score_mod_unavailable) r.text += ", score_mod not replayed";
  return r;
}

}  // namespace attnscope
