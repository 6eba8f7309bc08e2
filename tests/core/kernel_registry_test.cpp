// The kernel-variant registry itself: the names the GUI and CLI list, what each variant
// declares, the reasons supports() gives, error values of run_variant, and output shapes.
#include "core/kernel_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnscope {
namespace {

// A small GQA case with Sq != Sk and deterministic, smooth inputs.
struct SmallCase {
  AttnParams p;
  std::vector<double> q, k, v, dout;

  SmallCase(int64_t d, int64_t dv) {
    p.batch = 2;
    p.heads = 4;
    p.kv_heads = 2;
    p.seqlen_q = 5;
    p.seqlen_k = 7;
    p.head_dim = d;
    p.head_dim_v = dv;
    p.scale = 1.0 / std::sqrt(static_cast<double>(d));
    const auto fill = [](std::vector<double>& x, int64_t n, double phase) {
      x.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[i] = std::sin(0.37 * i + phase);
    };
    fill(q, 2 * 4 * 5 * d, 0.1);
    fill(k, 2 * 2 * 7 * d, 0.2);
    fill(v, 2 * 2 * 7 * dv, 0.3);
    fill(dout, 2 * 4 * 5 * dv, 0.4);
  }
  VariantInputs inputs() const { return {q.data(), k.data(), v.data(), dout.data()}; }
};

Mode mode_of(const KernelVariant& v) {
  return v.modes.empty() ? Mode::fused : v.modes.front();
}

const KernelVariant& variant(const std::string& name) {
  const KernelVariant* v = find_variant(name);
  EXPECT_NE(v, nullptr) << name;
  return *v;
}

// GPU variants (backends "cuda" and "torch-cuda") register only where a device is present; the
// gpu-labelled tests in tests/gpu cover them.
bool is_gpu_variant(const KernelVariant& v) {
  return v.backend == "cuda" || v.backend == "torch-cuda";
}

TEST(KernelRegistry, lists_every_cpu_variant_in_display_order) {
  const std::vector<std::string> expected = {"reference",      "cpu-fused",   "cpu-upcast",
                                             "cpu-unfused",    "torch-eager", "torch-sdpa-math",
                                             "torch-flash-cpu"};
  std::vector<std::string> cpu_names;
  for (const KernelVariant& v : kernel_variants()) {
    if (!is_gpu_variant(v)) cpu_names.push_back(v.name);
  }
  EXPECT_EQ(cpu_names, expected);
  EXPECT_EQ(find_variant("no-such-kernel"), nullptr);
  for (const KernelVariant& v : kernel_variants()) {
    EXPECT_FALSE(v.backend.empty()) << v.name;
    EXPECT_FALSE(v.description.empty()) << v.name;
    EXPECT_FALSE(v.semantics.empty()) << v.name;
    EXPECT_NE(v.description.find(v.semantics), std::string::npos) << v.name;
    EXPECT_FALSE(v.precisions.empty()) << v.name;
    EXPECT_TRUE(v.prepare) << v.name;
  }
}

TEST(KernelRegistry, backends_and_modes_follow_design) {
  EXPECT_EQ(variant("reference").backend, "reference");
  EXPECT_EQ(variant("cpu-fused").backend, "cpu");
  EXPECT_EQ(variant("torch-flash-cpu").backend, "torch");
  EXPECT_EQ(variant("cpu-fused").modes, std::vector<Mode>{Mode::fused});
  EXPECT_EQ(variant("cpu-unfused").modes, std::vector<Mode>{Mode::unfused});
  EXPECT_EQ(variant("torch-eager").modes, std::vector<Mode>{Mode::unfused});
  EXPECT_EQ(variant("torch-flash-cpu").modes, std::vector<Mode>{Mode::fused});
  // SDPA MATH on CPU and its emulation: fp32 compute, results rounded once (fused at fp32).
  EXPECT_EQ(variant("cpu-upcast").backend, "cpu");
  EXPECT_EQ(variant("cpu-upcast").modes, std::vector<Mode>{Mode::fused});
  EXPECT_EQ(variant("torch-sdpa-math").backend, "torch");
  EXPECT_EQ(variant("torch-sdpa-math").modes, std::vector<Mode>{Mode::fused});
  EXPECT_EQ(variant("torch-eager").precisions.size(), 4u);
  EXPECT_EQ(variant("torch-sdpa-math").precisions.size(), 4u);
  EXPECT_EQ(variant("reference").precisions, std::vector<Precision>{Precision::f64});
  EXPECT_TRUE(variant("reference").modes.empty());  // fp64: fused and unfused coincide
  const SmallCase small(16, 16);
  EXPECT_TRUE(variant("reference").supports(small.p, Precision::f64, Mode::unfused));
}

TEST(KernelRegistry, supports_gives_reasons_that_name_the_limit) {
  const SmallCase small(16, 16);
  const auto reason = [&](const std::string& name, const AttnParams& p, Precision prec, Mode m) {
    const Support s = variant(name).supports(p, prec, m);
    EXPECT_FALSE(s) << name;
    return s.reason;
  };
  EXPECT_TRUE(variant("cpu-fused").supports(small.p, Precision::bf16, Mode::fused));
  EXPECT_EQ(reason("reference", small.p, Precision::bf16, Mode::fused),
            "reference runs fp64, not bf16");
  EXPECT_EQ(reason("cpu-fused", small.p, Precision::f64, Mode::fused),
            "cpu-fused runs fp32/fp16/bf16, not fp64");
  EXPECT_EQ(reason("cpu-fused", small.p, Precision::f32, Mode::unfused),
            "cpu-fused implements fused semantics, not unfused");

  AttnParams br = small.p;
  br.causal = true;
  br.causal_align = CausalAlign::bottom_right;
  EXPECT_NE(reason("torch-flash-cpu", br, Precision::f32, Mode::fused).find("top-left only"),
            std::string::npos);
  br.seqlen_k = br.seqlen_q;  // the alignments coincide when Sq == Sk
  EXPECT_TRUE(variant("torch-flash-cpu").supports(br, Precision::f32, Mode::fused));

  AttnParams capped = small.p;
  capped.softcap = 30;
  EXPECT_NE(reason("torch-flash-cpu", capped, Precision::f32, Mode::fused).find("softcap"),
            std::string::npos);
  const SmallCase dv(16, 8);
  EXPECT_NE(reason("torch-flash-cpu", dv.p, Precision::f32, Mode::fused).find("head_dim_v"),
            std::string::npos);

  AttnParams bad = small.p;
  bad.kv_heads = 3;
  EXPECT_NE(reason("cpu-fused", bad, Precision::f32, Mode::fused).find("must divide heads"),
            std::string::npos);
}

TEST(KernelRegistry, run_variant_returns_unsupported_as_an_error_value) {
  const SmallCase small(16, 8);
  const Result<VariantOutputs> r = run_variant(variant("torch-flash-cpu"), small.p,
                                               {Precision::f32, Mode::fused, 1}, small.inputs());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::unsupported);
  EXPECT_NE(r.error().message.find("torch-flash-cpu: "), std::string::npos);

  const Result<VariantOutputs> no_q =
      run_variant(variant("cpu-fused"), small.p, {Precision::f32, Mode::fused, 1}, {});
  ASSERT_FALSE(no_q.ok());
  EXPECT_EQ(no_q.error().code, ErrorCode::invalid_argument);
}

// Every variant, at its first precision and mode, returns the layout contract's shapes:
// o [B,H,Sq,Dv], lse [B,H,Sq], dq [B,H,Sq,D], dk [B,Hk,Sk,D], dv [B,Hk,Sk,Dv].
TEST(KernelRegistry, every_variant_returns_contract_shapes_with_gqa_and_sq_ne_sk) {
  const SmallCase small(16, 16);
  const AttnParams& p = small.p;
  for (const KernelVariant& v : kernel_variants()) {
    const RunConfig config{v.precisions.front(), mode_of(v), 1};
    const Result<VariantOutputs> r = run_variant(v, p, config, small.inputs());
    ASSERT_TRUE(r.ok()) << v.name << ": " << r.error().describe();
    EXPECT_EQ(r->o.size(), static_cast<size_t>(2 * 4 * 5 * 16)) << v.name;
    EXPECT_EQ(r->lse.size(), static_cast<size_t>(2 * 4 * 5)) << v.name;
    EXPECT_EQ(r->dq.size(), static_cast<size_t>(2 * 4 * 5 * 16)) << v.name;
    EXPECT_EQ(r->dk.size(), static_cast<size_t>(2 * 2 * 7 * 16)) << v.name;
    EXPECT_EQ(r->dv.size(), static_cast<size_t>(2 * 2 * 7 * 16)) << v.name;
    for (double x : r->o) ASSERT_TRUE(std::isfinite(x)) << v.name;
  }
}

TEST(KernelRegistry, dv_differs_shapes_for_variants_that_support_it) {
  const SmallCase small(16, 8);
  for (const KernelVariant& v : kernel_variants()) {
    const RunConfig config{v.precisions.front(), mode_of(v), 1};
    if (!v.supports(small.p, config.precision, config.mode)) continue;
    const Result<VariantOutputs> r = run_variant(v, small.p, config, small.inputs());
    ASSERT_TRUE(r.ok()) << v.name << ": " << r.error().describe();
    EXPECT_EQ(r->o.size(), static_cast<size_t>(2 * 4 * 5 * 8)) << v.name;
    EXPECT_EQ(r->dq.size(), static_cast<size_t>(2 * 4 * 5 * 16)) << v.name;
    EXPECT_EQ(r->dv.size(), static_cast<size_t>(2 * 2 * 7 * 8)) << v.name;
  }
}

// A prepared run can be repeated (what attnscope-bench does) and gives the same result.
TEST(KernelRegistry, prepared_runs_repeat_deterministically) {
  const SmallCase small(16, 16);
  for (const std::string name :
       {"cpu-fused", "cpu-upcast", "torch-eager", "torch-sdpa-math", "torch-flash-cpu"}) {
    const KernelVariant& v = variant(name);
    const RunConfig config{Precision::bf16, mode_of(v), 1};
    const auto run = v.prepare(small.p, config, small.inputs());
    run->forward();
    run->backward();
    const VariantOutputs first = run->outputs();
    run->forward();
    run->backward();
    const VariantOutputs second = run->outputs();
    EXPECT_EQ(first.o, second.o) << name;
    EXPECT_EQ(first.dq, second.dq) << name;
    EXPECT_EQ(first.dk, second.dk) << name;
  }
}

// attnscope-bench times the cpu kernels with instrumentation on; it must not change results.
TEST(KernelRegistry, instrumented_cpu_runs_give_identical_outputs) {
  const SmallCase small(16, 16);
  for (const std::string name : {"cpu-fused", "cpu-unfused"}) {
    const KernelVariant& v = variant(name);
    RunConfig config{Precision::f16, v.modes.front(), 1};
    const Result<VariantOutputs> plain = run_variant(v, small.p, config, small.inputs());
    config.instrument = true;
    const Result<VariantOutputs> traced = run_variant(v, small.p, config, small.inputs());
    ASSERT_TRUE(plain.ok() && traced.ok()) << name;
    EXPECT_EQ(plain->o, traced->o) << name;
    EXPECT_EQ(plain->lse, traced->lse) << name;
    EXPECT_EQ(plain->dq, traced->dq) << name;
    EXPECT_EQ(plain->dv, traced->dv) << name;
  }
}

TEST(KernelRegistry, dout_null_means_gradient_of_sum) {
  const SmallCase small(16, 16);
  VariantInputs in = small.inputs();
  in.dout = nullptr;
  std::vector<double> ones(small.dout.size(), 1.0);
  for (const KernelVariant& v : kernel_variants()) {
    const RunConfig config{v.precisions.front(), mode_of(v), 1};
    const Result<VariantOutputs> a = run_variant(v, small.p, config, in);
    VariantInputs with_ones = small.inputs();
    with_ones.dout = ones.data();
    const Result<VariantOutputs> b = run_variant(v, small.p, config, with_ones);
    ASSERT_TRUE(a.ok() && b.ok()) << v.name;
    EXPECT_EQ(a->dv, b->dv) << v.name;
  }
}

// The semantics each variant runs, as the matrix and the backend picker show them.
TEST(KernelRegistry, semantics_name_what_each_variant_runs) {
  const auto semantics = [](const std::string& name) { return variant(name).semantics; };
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  const auto description = [](const std::string& name) { return variant(name).description; };
  EXPECT_TRUE(has(semantics("reference"), "fp64 throughout")) << semantics("reference");
  EXPECT_TRUE(has(semantics("cpu-fused"), "FlashAttention-2 emulation")) << semantics("cpu-fused");
  EXPECT_TRUE(has(semantics("cpu-upcast"), "SDPA MATH emulation: fp16/bf16 upcast to fp32"))
      << semantics("cpu-upcast");
  EXPECT_TRUE(has(semantics("cpu-unfused"), "eager math, every op's output in the precision"))
      << semantics("cpu-unfused");
  EXPECT_TRUE(has(description("cpu-unfused"), "saved softmax whatever backward_p says"))
      << description("cpu-unfused");
  EXPECT_TRUE(has(semantics("torch-eager"), "eager math, every op in the precision"))
      << semantics("torch-eager");
  EXPECT_TRUE(
      has(semantics("torch-sdpa-math"), "SDPA MATH: fp16/bf16 upcast to fp32, output rounded once"))
      << semantics("torch-sdpa-math");
  EXPECT_TRUE(has(semantics("torch-flash-cpu"), "FlashAttention-2, P from the LSE"))
      << semantics("torch-flash-cpu");
  EXPECT_TRUE(has(description("torch-flash-cpu"), "recomputes P = exp(S - LSE)"));
  EXPECT_TRUE(has(description("torch-sdpa-math"), "_scaled_dot_product_attention_math"));
  EXPECT_TRUE(has(description("torch-eager"), "P * keep / (1 - p)"));
}

// A small case with a dropout keep-mask (every third element dropped) of [B, H, Sq, Sk].
struct DropoutCase : SmallCase {
  std::vector<uint8_t> keep;

  explicit DropoutCase(double prob) : SmallCase(16, 16) {
    keep.resize(2 * 4 * 5 * 7);
    for (size_t e = 0; e < keep.size(); ++e) keep[e] = e % 3 != 0;
    p.dropout_keep = keep.data();
    p.dropout_strides = {4 * 5 * 7, 5 * 7, 7, 1};
    p.dropout_p = prob;
  }
};

TEST(KernelRegistry, dropout_without_keep_mask_is_refused_by_every_variant) {
  SmallCase small(16, 16);
  small.p.dropout_p = 0.1;
  for (const KernelVariant& v : kernel_variants()) {
    const Support s = v.supports(small.p, v.precisions.front(), mode_of(v));
    EXPECT_FALSE(s) << v.name;
    EXPECT_NE(s.reason.find("without its keep-mask cannot be replayed"), std::string::npos)
        << v.name << ": " << s.reason;
  }
  small.p.dropout_p = 1;
  EXPECT_NE(variant("reference")
                .supports(small.p, Precision::f64, Mode::fused)
                .reason.find("outside [0, 1)"),
            std::string::npos);
}

TEST(KernelRegistry, dropout_keep_mask_is_honoured_or_refused_with_a_reason) {
  const DropoutCase dropped(0.25);
  for (const std::string name :
       {"reference", "cpu-fused", "cpu-upcast", "cpu-unfused", "torch-eager", "torch-sdpa-math"}) {
    const KernelVariant& v = variant(name);
    EXPECT_TRUE(v.supports(dropped.p, v.precisions.front(), mode_of(v))) << name;
  }
  const Support flash = variant("torch-flash-cpu").supports(dropped.p, Precision::f32, Mode::fused);
  EXPECT_FALSE(flash);
  EXPECT_EQ(flash.reason,
            "torch-flash-cpu cannot replay a dropout keep-mask: PyTorch's CPU flash kernel has no "
            "dropout");
  // SDPA MATH ignores its dropout_mask at dropout_p = 0; the others scale kept P by 1.
  const DropoutCase p0(0);
  const Support math = variant("torch-sdpa-math").supports(p0.p, Precision::f32, Mode::fused);
  EXPECT_FALSE(math);
  EXPECT_NE(math.reason.find("only when dropout_p > 0"), std::string::npos) << math.reason;
  EXPECT_TRUE(variant("torch-eager").supports(p0.p, Precision::f32, Mode::unfused));
}

// Every variant that runs a keep-mask gives the reference's O at fp32 within the fp32 rule.
TEST(KernelRegistry, dropout_keep_mask_variants_agree_with_the_reference_at_fp32) {
  const DropoutCase dropped(0.25);
  const Result<VariantOutputs> ref = run_variant(
      variant("reference"), dropped.p, {Precision::f64, Mode::fused, 1}, dropped.inputs());
  ASSERT_TRUE(ref.ok()) << ref.error().describe();
  for (const std::string name :
       {"cpu-fused", "cpu-upcast", "cpu-unfused", "torch-eager", "torch-sdpa-math"}) {
    const KernelVariant& v = variant(name);
    const Result<VariantOutputs> r =
        run_variant(v, dropped.p, {Precision::f32, mode_of(v), 1}, dropped.inputs());
    ASSERT_TRUE(r.ok()) << name << ": " << r.error().describe();
    for (const auto& [got, want] : {std::pair{&r->o, &ref->o}, std::pair{&r->dq, &ref->dq},
                                    std::pair{&r->dk, &ref->dk}, std::pair{&r->dv, &ref->dv}}) {
      ASSERT_EQ(got->size(), want->size()) << name;
      for (size_t e = 0; e < got->size(); ++e) {
        ASSERT_NEAR((*got)[e], (*want)[e], 1e-5) << name << " element " << e;
      }
    }
  }
}

// A bias row of finfo(fp32).min on every key: P from the LSE is 1 per key, not 1 / Sk.
struct SentinelCase : SmallCase {
  std::vector<double> bias;

  explicit SentinelCase(double row_value) : SmallCase(16, 16) {
    bias.assign(5 * 7, 0.25);
    std::fill_n(bias.begin(), 7, row_value);
    p.bias = bias.data();
    p.bias_strides = {0, 0, 7, 1};
  }
};

TEST(KernelRegistry, backward_p_is_honoured_or_refused_where_it_matters) {
  SentinelCase sentinel(-3.4028234663852886e38);
  EXPECT_TRUE(backward_p_matters(sentinel.p));
  sentinel.p.backward_p = BackwardP::from_lse;
  for (const std::string name :
       {"reference", "cpu-fused", "cpu-upcast", "cpu-unfused", "torch-flash-cpu"}) {
    const KernelVariant& v = variant(name);
    EXPECT_TRUE(v.supports(sentinel.p, v.precisions.front(), mode_of(v))) << name;
  }
  for (const std::string name : {"torch-eager", "torch-sdpa-math"}) {
    const KernelVariant& v = variant(name);
    const Support s = v.supports(sentinel.p, Precision::f32, mode_of(v));
    EXPECT_FALSE(s) << name;
    EXPECT_EQ(
        s.reason.rfind(name + " takes the backward's P from the saved softmax, not from_lse", 0),
        0u)
        << s.reason;
  }
  // Ordinary biases cannot make the two P sources differ: nothing is refused.
  SentinelCase ordinary(-30);
  ordinary.p.backward_p = BackwardP::from_lse;
  EXPECT_FALSE(backward_p_matters(ordinary.p));
  EXPECT_TRUE(variant("torch-eager").supports(ordinary.p, Precision::f16, Mode::unfused));
}

TEST(KernelRegistry, backward_p_matters_for_finite_fills_that_can_hide_a_row) {
  SmallCase small(16, 16);
  EXPECT_FALSE(backward_p_matters(small.p));
  small.p.mask_fill = MaskFill::neg_1e9;
  small.p.causal = true;  // top-left with Sq <= Sk: key 0 stays visible
  EXPECT_FALSE(backward_p_matters(small.p));
  small.p.causal_align = CausalAlign::bottom_right;
  small.p.seqlen_q = 9;  // Sq > Sk bottom-right: the first two rows see no key
  EXPECT_TRUE(backward_p_matters(small.p));
  small.p.mask_fill = MaskFill::safe;
  EXPECT_FALSE(backward_p_matters(small.p));
  const uint8_t keep = 1;
  small.p.mask = &keep;  // presence is enough: a mask may hide a whole row
  small.p.mask_fill = MaskFill::finfo_min;
  small.p.precision = Precision::f16;
  EXPECT_TRUE(backward_p_matters(small.p));
}

TEST(KernelRegistry, torch_sdpa_math_refuses_softcap) {
  SmallCase capped(16, 16);
  capped.p.softcap = 30;
  const Support s = variant("torch-sdpa-math").supports(capped.p, Precision::f16, Mode::fused);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.reason, "torch-sdpa-math: SDPA has no tanh softcap");
}

// At fp32 "upcast" changes nothing: cpu-upcast is cpu-fused bit for bit.
TEST(KernelRegistry, cpu_upcast_at_fp32_is_cpu_fused) {
  const SmallCase small(16, 16);
  const Result<VariantOutputs> fused =
      run_variant(variant("cpu-fused"), small.p, {Precision::f32, Mode::fused, 1}, small.inputs());
  const Result<VariantOutputs> upcast =
      run_variant(variant("cpu-upcast"), small.p, {Precision::f32, Mode::fused, 1}, small.inputs());
  ASSERT_TRUE(fused.ok() && upcast.ok());
  EXPECT_EQ(fused->o, upcast->o);
  EXPECT_EQ(fused->lse, upcast->lse);
  EXPECT_EQ(fused->dq, upcast->dq);
  EXPECT_EQ(fused->dk, upcast->dk);
  EXPECT_EQ(fused->dv, upcast->dv);
}

TEST(KernelRegistry, names_of_precisions_and_modes) {
  EXPECT_STREQ(precision_name(Precision::f64), "fp64");
  EXPECT_STREQ(precision_name(Precision::bf16), "bf16");
  EXPECT_STREQ(mode_name(Mode::unfused), "unfused");
  EXPECT_STREQ(backward_p_name(BackwardP::from_lse), "from_lse");
}

}  // namespace
}  // namespace attnscope
