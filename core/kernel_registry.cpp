// The registry table: reference, cpu-fused, cpu-upcast, cpu-unfused, torch-eager,
// torch-sdpa-math, torch-flash-cpu (plus the GPU variants of core/cuda_variants.h on CUDA
// machines); support checks with reasons and the error-as-value runner.
#include "core/kernel_registry.h"

#include <algorithm>
#include <cmath>
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

// PyTorch's CPU flash kernel: equal q/k/v head sizes, no softcap, causal only top-left, no
// dropout.
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
  return refuse_dropout_keep("torch-flash-cpu", p, "PyTorch's CPU flash kernel has no dropout");
}

// Autograd differentiates the forward's own softmax: P saved.
Support torch_eager_limits(const AttnParams& p) {
  return fixed_backward_p("torch-eager", BackwardP::saved, p);
}

Support torch_sdpa_math_limits(const AttnParams& p) {
  if (p.softcap > 0) return Support::no("torch-sdpa-math: SDPA has no tanh softcap");
  if (p.dropout_keep != nullptr && p.dropout_p == 0) {
    return Support::no(
        "torch-sdpa-math: SDPA MATH applies a dropout_mask only when dropout_p > 0 "
        "(the keep-mask has dropout_p = 0)");
  }
  return fixed_backward_p("torch-sdpa-math", BackwardP::saved, p);
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

// Largest finite |bias| over the bias's broadcast extent (stride-0 dims read once).
double max_finite_bias(const AttnParams& p) {
  const BroadcastStrides& st = p.bias_strides;
  const int64_t nb = st.b ? p.batch : 1, nh = st.h ? p.heads : 1;
  const int64_t nq = st.q ? p.seqlen_q : 1, nk = st.k ? p.seqlen_k : 1;
  double top = 0;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t i = 0; i < nq; ++i) {
        const double* row = p.bias + b * st.b + h * st.h + i * st.q;
        for (int64_t j = 0; j < nk; ++j) {
          const double x = std::abs(row[j * st.k]);
          if (std::isfinite(x) && x > top) top = x;
        }
      }
    }
  }
  return top;
}

std::vector<KernelVariant> build_table() {
  const std::vector<Precision> low = {Precision::f32, Precision::f16, Precision::bf16};
  const std::vector<Precision> all = {Precision::f64, Precision::f32, Precision::f16,
                                      Precision::bf16};
  const std::string as_asked = "honours the dropout keep-mask and backward_p (saved or from_lse)";
  std::vector<KernelVariant> t;
  t.push_back(
      make_variant({"reference", "reference", "fp64 throughout",
                    "naive attention materialising every intermediate (the oracle)", as_asked},
                   {Precision::f64}, {}, nullptr, make_reference_run));
  t.push_back(make_variant(
      {"cpu-fused", "cpu",
       "FlashAttention-2 emulation: fp32 accumulation, P and dS rounded, stores rounded once",
       "own tiled CPU kernel", as_asked},
      low, {Mode::fused}, nullptr, cpu_in_mode(Mode::fused)));
  t.push_back(make_variant(
      {"cpu-upcast", "cpu", "SDPA MATH emulation: fp16/bf16 upcast to fp32, outputs rounded once",
       "own tiled CPU kernel at fp32 on inputs rounded to the precision, O, dQ, dK, dV rounded "
       "once to it",
       as_asked},
      low, {Mode::fused}, nullptr, make_cpu_upcast_run));
  t.push_back(make_variant(
      {"cpu-unfused", "cpu", "eager math, every op's output in the precision",
       "own op-by-op emulation of eager PyTorch attention",
       "honours the dropout keep-mask; the backward uses the saved softmax whatever backward_p "
       "says (eager autograd by definition)"},
      low, {Mode::unfused}, nullptr, cpu_in_mode(Mode::unfused)));
  t.push_back(make_variant(
      {"torch-eager", "torch", "eager math, every op in the precision",
       "LibTorch eager attention op by op (matmul, softmax, matmul) with autograd",
       "dropout keep-mask as P * keep / (1 - p); P saved, so backward_p = from_lse is refused "
       "where it matters"},
      all, {Mode::unfused}, torch_eager_limits, make_torch_eager_run));
  t.push_back(make_variant(
      {"torch-sdpa-math", "torch", "SDPA MATH: fp16/bf16 upcast to fp32, output rounded once",
       "LibTorch at::_scaled_dot_product_attention_math with autograd",
       "_safe_softmax (fully masked rows give 0); a finite mask fill is added like a float "
       "mask; dropout keep-mask via dropout_mask; P saved, so backward_p = from_lse is refused "
       "where it matters"},
      all, {Mode::fused}, torch_sdpa_math_limits, make_torch_sdpa_math_run));
  t.push_back(make_variant(
      {"torch-flash-cpu", "torch", "FlashAttention-2, P from the LSE in the backward",
       "PyTorch's CPU flash SDPA kernel (_scaled_dot_product_flash_attention_for_cpu)",
       "its backward recomputes P = exp(S - LSE) whatever backward_p says; fully masked rows "
       "give 0; no dropout"},
      all, {Mode::fused}, torch_flash_cpu_limits, make_torch_flash_cpu_run));
#if defined(ATTNSCOPE_WITH_CUDA)
  add_cuda_variants(t);  // only when a CUDA device is present
#endif
  return t;
}

}  // namespace

Support KernelVariant::supports(const AttnParams& params, Precision precision, Mode mode) const {
  if (Support s = valid_sizes(params); !s) return s;
  if (Support s = supported_dropout(params); !s) return Support::no(name + ": " + s.reason);
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

Result<VariantOutputs> run_backend_variant(const std::string& name, const AttnParams& params,
                                           Mode mode, int threads, const VariantInputs& inputs) {
  const KernelVariant* variant = find_variant(name);
  if (variant == nullptr) {
    return make_error(ErrorCode::invalid_argument, "unknown backend '" + name + "'",
                      "pick one of the backend list (core/kernel_registry)");
  }
  RunConfig config;
  config.precision =
      variant->precisions.size() == 1 ? variant->precisions.front() : params.precision;
  config.mode = variant->modes.empty() ? mode : variant->modes.front();
  config.threads = threads;
  AttnParams p = params;
  p.precision = config.precision;
  return run_variant(*variant, p, config, inputs);
}

KernelVariant make_variant(const VariantText& text, std::vector<Precision> precisions,
                           std::vector<Mode> modes,
                           std::function<Support(const AttnParams&)> check_params,
                           PrepareFn prepare) {
  return {text.name,
          text.backend,
          text.semantics,
          text.what + ": " + text.semantics + "; " + text.notes,
          std::move(precisions),
          std::move(modes),
          std::move(check_params),
          std::move(prepare)};
}

Support supported_dropout(const AttnParams& p) {
  if (!(p.dropout_p >= 0 && p.dropout_p < 1)) {
    return Support::no("dropout_p " + std::to_string(p.dropout_p) + " is outside [0, 1)");
  }
  if (p.dropout_p > 0 && p.dropout_keep == nullptr) {
    return Support::no("dropout p = " + std::to_string(p.dropout_p) +
                       " without its keep-mask cannot be replayed element-wise");
  }
  return Support::yes();
}

Support refuse_dropout_keep(const std::string& variant, const AttnParams& p,
                            const std::string& why) {
  if (p.dropout_keep == nullptr) return Support::yes();
  return Support::no(variant + " cannot replay a dropout keep-mask: " + why);
}

bool backward_p_matters(const AttnParams& p) {
  const double huge = finfo_max(Precision::f16);
  // Causality alone hides every key of a row only bottom-right with Sq > Sk.
  const bool row_can_be_hidden =
      p.mask != nullptr ||
      (p.causal && p.causal_align == CausalAlign::bottom_right && p.seqlen_q > p.seqlen_k);
  const double fill = mask_fill_value(p.mask_fill, p.precision);
  if (row_can_be_hidden && std::isfinite(fill) && std::abs(fill) >= huge) return true;
  return p.bias != nullptr && max_finite_bias(p) >= huge;
}

Support fixed_backward_p(const std::string& variant, BackwardP runs, const AttnParams& p) {
  if (p.backward_p == runs || !backward_p_matters(p)) return Support::yes();
  const std::string source = runs == BackwardP::saved ? "the saved softmax" : "exp(S - LSE)";
  return Support::no(variant + " takes the backward's P from " + source + ", not " +
                     backward_p_name(p.backward_p) +
                     " as asked, and this case has huge finite scores (a finite mask fill or a "
                     "bias of magnitude >= 65504) where the two differ");
}

}  // namespace attnscope
