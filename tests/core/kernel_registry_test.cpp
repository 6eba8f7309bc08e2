// The kernel-variant registry itself: the names the GUI and CLI list, what each variant
// declares, the reasons supports() gives, error values of run_variant, and output shapes.
#include "core/kernel_registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
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
  const std::vector<std::string> expected = {"reference", "cpu-fused", "cpu-unfused", "torch-math",
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
  EXPECT_EQ(variant("torch-math").modes, std::vector<Mode>{Mode::unfused});
  EXPECT_EQ(variant("torch-flash-cpu").modes, std::vector<Mode>{Mode::fused});
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
  for (const std::string name : {"cpu-fused", "torch-math", "torch-flash-cpu"}) {
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

TEST(KernelRegistry, names_of_precisions_and_modes) {
  EXPECT_STREQ(precision_name(Precision::f64), "fp64");
  EXPECT_STREQ(precision_name(Precision::bf16), "bf16");
  EXPECT_STREQ(mode_name(Mode::unfused), "unfused");
}

}  // namespace
}  // namespace attnscope
