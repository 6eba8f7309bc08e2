// The kernel-variant registry (DESIGN §1): every attention implementation attnscope can run,
// with its backend, precision and mode support, a support check that says why not, and a runner
// over plain fp64 vectors. The GUI's backend picker, the CLI, the test harness and
// attnscope-bench all read this one table.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/case_inputs.h"
#include "core/result.h"
#include "kernels/attn_names.h"  // mode_name, backward_p_name, precision_name
#include "kernels/attn_params.h"
#include "kernels/cpu/fused_attention.h"

namespace attnscope {

// Inputs of a run as fp64 values; layouts as in AttnParams (mask and bias come through
// AttnParams and must outlive any VariantRun prepared from them). For an exact comparison the
// caller passes values representable in the run's precision; otherwise the variant rounds them.
struct VariantInputs {
  const double* q = nullptr;     // [B, H, Sq, D]
  const double* k = nullptr;     // [B, Hk, Sk, D]
  const double* v = nullptr;     // [B, Hk, Sk, Dv]
  const double* dout = nullptr;  // [B, H, Sq, Dv]; nullptr = all ones (gradient of sum(O))
};

// Outputs of every variant as fp64 copies of what it stored:
//   o [B, H, Sq, Dv]   lse [B, H, Sq]   dq [B, H, Sq, D]   dk [B, Hk, Sk, D]   dv [B, Hk, Sk, Dv]
struct VariantOutputs {
  std::vector<double> o, lse, dq, dk, dv;
};

struct RunConfig {
  Precision precision = Precision::f32;
  Mode mode = Mode::fused;
  int threads = 0;  // worker threads of the CPU kernels and of LibTorch; 0 = their default
  // cpu-* variants: record the instrumentation (kernels/attn_trace.h) on every run; the
  // outputs stay bit-identical. Other variants have none and ignore it.
  bool instrument = false;
};

// Verdict of a support check: supported, or the reason it is not (shown in the GUI and by
// skipped tests).
struct Support {
  bool ok = true;
  std::string reason;

  explicit operator bool() const { return ok; }
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// One prepared run: the inputs are converted once to the variant's types, so forward() and
// backward() can be called (and timed) repeatedly. backward() needs a forward() first;
// outputs() converts the latest results to fp64. Methods may throw std::exception.
class VariantRun {
 public:
  virtual ~VariantRun() = default;
  virtual void forward() = 0;
  virtual void backward() = 0;
  virtual VariantOutputs outputs() const = 0;
};

using PrepareFn = std::function<std::unique_ptr<VariantRun>(const AttnParams&, const RunConfig&,
                                                            const VariantInputs&)>;

struct KernelVariant {
  std::string name;     // "cpu-fused": what the backend picker and the CLI show
  std::string backend;  // "reference", "cpu", "torch", "cuda", "torch-cuda"
  // The numerics it runs, in a few words ("eager math, every op in the precision"): the
  // matrix rows and `attnscope-cli compare` show it.
  std::string semantics;
  std::string description;  // one line for tooltips and --help; contains `semantics`
  std::vector<Precision> precisions;
  // The kernel semantics (DESIGN §3) the variant implements; empty = any mode (the fp64
  // reference, where fused and unfused coincide).
  std::vector<Mode> modes;
  // Shape and option limits beyond precision and mode (nullptr: none).
  std::function<Support(const AttnParams&)> check_params;
  PrepareFn prepare;

  // Sizes and dropout valid (supported_dropout), precision and mode listed, then check_params.
  Support supports(const AttnParams& params, Precision precision, Mode mode) const;
};

// What a variant is called and says about itself; its description reads
// "<what>: <semantics>; <notes>" (notes: dropout, backward_p and what it refuses).
struct VariantText {
  std::string name, backend, semantics, what, notes;
};
KernelVariant make_variant(const VariantText& text, std::vector<Precision> precisions,
                           std::vector<Mode> modes,
                           std::function<Support(const AttnParams&)> check_params,
                           PrepareFn prepare);

// Every registered variant, in display order.
const std::vector<KernelVariant>& kernel_variants();
std::vector<std::string> variant_names();
// nullptr when no variant has that name.
const KernelVariant* find_variant(const std::string& name);

// supports(), then prepare, forward, backward and outputs. Unsupported combinations, invalid
// sizes and exceptions from the kernels or LibTorch come back as errors.
Result<VariantOutputs> run_variant(const KernelVariant& variant, const AttnParams& params,
                                   const RunConfig& config, const VariantInputs& inputs);

// Variant `name` as a what-if backend runs: in its own precision and mode when it fixes them,
// else params.precision and `mode`. Fails on an unknown name, then like run_variant.
Result<VariantOutputs> run_backend_variant(const std::string& name, const AttnParams& params,
                                           Mode mode, int threads, const VariantInputs& inputs);

// Support checks the variants share; their reasons start with the variant's name (supports()
// prefixes supported_dropout's).
// Every variant: dropout_p in [0, 1), and dropout_p > 0 only with its keep-mask (without it the
// run's dropout cannot be replayed element-wise).
Support supported_dropout(const AttnParams& params);
// A variant that applies no dropout keep-mask (its own RNG, or no dropout at all): refuses one.
Support refuse_dropout_keep(const std::string& variant, const AttnParams& params,
                            const std::string& why);
// True when a row's scores may all be one huge finite value, |s| >= 65504 (finfo(fp16).max):
// a finite mask fill where a mask or causality hides keys, or such a bias entry. There the LSE
// absorbs log l, so P recomputed from it (BackwardP::from_lse) differs from the saved P.
// Reads the bias values (its broadcast extent only).
bool backward_p_matters(const AttnParams& params);
// A variant whose backward always takes P from `runs`: refuses params asking for the other
// source where backward_p_matters.
Support fixed_backward_p(const std::string& variant, BackwardP runs, const AttnParams& params);

}  // namespace attnscope
