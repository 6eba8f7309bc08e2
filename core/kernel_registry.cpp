// The registry table: reference, cpu-fused, cpu-unfused, torch-math, torch-flash-cpu (plus the
// GPU variants of core/cuda_variants.h on CUDA machines); support checks with reasons and the
// error-as-value runner.
#include "core/kernel_registry.h"

#include <algorithm>
#include <exception>
#include <string>

#include "core/variant_runs.h"
#if defined(ATTNSCOPE_WITH_CUDA)
#include "core/cuda_variants.h"
#endif

namespace attnscope {
namespace {

template <typename T>
bool contains(const std::vector<T>& list, T x) {
  return std::find(list.begin(), list.end(), x) != list.end();
}

std::string join_precisions(const std::vector<Precision>& list) {
  std::string out;
  for (Precision p : list) out += (out.empty() ? "" : "/") + std::string(precision_name(p));
  return out;
}

Support valid_sizes(const AttnParams& p) {
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.seqlen_q < 1 || p.seqlen_k < 1 ||
      p.head_dim < 1 || p.head_dim_v < 1) {
    return Support::no(
        "batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim and head_dim_v "
        "must all be >= 1");
  }
  if (p.heads % p.kv_heads != 0) {
    return Support::no("kv_heads (" + std::to_string(p.kv_heads) + ") must divide heads (" +
                       std::to_string(p.heads) + ")");
  }
  return Support::yes();
}

// PyTorch's CPU flash kernel: equal q/k/v head sizes, no softcap, causal only top-left.
Support torch_flash_cpu_limits(const AttnParams& p) {
  if (p.head_dim != p.head_dim_v) {
    return Support::no("torch-flash-cpu needs equal q/k and v head sizes (head_dim " +
                       std::to_string(p.head_dim) + " != head_dim_v " +
                       std::to_string(p.head_dim_v) + ")");
  }
  if (p.softcap > 0) return Support::no("torch-flash-cpu has no tanh softcap");
  if (p.causal && p.causal_align == CausalAlign::bottom_right && p.seqlen_q != p.seqlen_k) {
    return Support::no(
        "torch-flash-cpu aligns causal masks top-left only (PyTorch SDPA); "
        "bottom-right with seqlen_q != seqlen_k is unsupported");
  }
  return Support::yes();
}

// The CPU kernels in a fixed mode, whatever the caller's config says.
PrepareFn cpu_in_mode(Mode mode) {
  return [mode](const AttnParams& params, const RunConfig& config, const VariantInputs& inputs) {
    RunConfig fixed = config;
    fixed.mode = mode;
    return make_cpu_run(params, fixed, inputs);
  };
}

// First line of an exception message (LibTorch appends a C++ backtrace).
std::string first_line(const char* what) {
  const std::string text = what;
  return text.substr(0, text.find('\n'));
}

std::vector<KernelVariant> build_table() {
  const std::vector<Precision> low = {Precision::f32, Precision::f16, Precision::bf16};
  const std::vector<Precision> all = {Precision::f64, Precision::f32, Precision::f16,
                                      Precision::bf16};
  std::vector<KernelVariant> t;
  t.push_back({"reference",
               "reference",
               "naive fp64 attention materialising every intermediate (the test oracle)",
               {Precision::f64},
               {},
               nullptr,
               make_reference_run});
  t.push_back({"cpu-fused",
               "cpu",
               "own tiled FlashAttention-2 CPU kernel, fp32 accumulation, stores rounded",
               low,
               {Mode::fused},
               nullptr,
               cpu_in_mode(Mode::fused)});
  t.push_back({"cpu-unfused",
               "cpu",
               "own op-by-op eager attention emulation, every op's output rounded",
               low,
               {Mode::unfused},
               nullptr,
               cpu_in_mode(Mode::unfused)});
  t.push_back({"torch-math",
               "torch",
               "LibTorch eager math attention (matmul, softmax, matmul) with autograd",
               all,
               {Mode::unfused},
               nullptr,
               make_torch_math_run});
  t.push_back({"torch-flash-cpu",
               "torch",
               "PyTorch's CPU flash SDPA kernel (_scaled_dot_product_flash_attention_for_cpu)",
               all,
               {Mode::fused},
               torch_flash_cpu_limits,
               make_torch_flash_cpu_run});
#if defined(ATTNSCOPE_WITH_CUDA)
  add_cuda_variants(t);  // only when a CUDA device is present
#endif
  return t;
}

}  // namespace

Support KernelVariant::supports(const AttnParams& params, Precision precision, Mode mode) const {
  if (Support s = valid_sizes(params); !s) return s;
  if (!contains(precisions, precision)) {
    return Support::no(name + " runs " + join_precisions(precisions) + ", not " +
                       precision_name(precision));
  }
  if (!modes.empty() && !contains(modes, mode)) {
    return Support::no(name + " implements " + mode_name(modes.front()) + " semantics, not " +
                       mode_name(mode));
  }
  return check_params ? check_params(params) : Support::yes();
}

const std::vector<KernelVariant>& kernel_variants() {
  static const std::vector<KernelVariant> table = build_table();
  return table;
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const KernelVariant& v : kernel_variants()) names.push_back(v.name);
  return names;
}

const KernelVariant* find_variant(const std::string& name) {
  for (const KernelVariant& v : kernel_variants()) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

Result<VariantOutputs> run_variant(const KernelVariant& variant, const AttnParams& params,
                                   const RunConfig& config, const VariantInputs& inputs) {
  const Support s = variant.supports(params, config.precision, config.mode);
  if (!s) return make_error(ErrorCode::unsupported, variant.name + ": " + s.reason);
  if (inputs.q == nullptr || inputs.k == nullptr || inputs.v == nullptr) {
    return make_error(ErrorCode::invalid_argument, variant.name + ": q, k and v are required");
  }
  try {
    std::unique_ptr<VariantRun> run = variant.prepare(params, config, inputs);
    run->forward();
    run->backward();
    return run->outputs();
  } catch (const std::exception& e) {
    return make_error(ErrorCode::invalid_argument, variant.name + ": " + first_line(e.what()),
                      "check the shapes against AttnParams' layout contract");
  }
}

const char* mode_name(Mode m) {
  return m == Mode::fused ? "fused" : "unfused";
}

}  // namespace attnscope
