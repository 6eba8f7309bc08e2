// GPU tests of the CUDA kernel's instrumentation and pathologies against the CPU kernel's
// (label gpu; every test skips with "skipped: no GPU" without a device): m / l / LSE, tile
// stats, gradient norms, provenance counts of NaN inputs and fully masked rows, the safe fill,
// and outputs unchanged by instrumentation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/fused_attention.h"
#include "kernels/cpu/head_matrices.h"
#include "kernels/cuda/cuda_attention.h"

namespace attnscope::cuda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

#define SKIP_WITHOUT_GPU() \
  if (device_count() == 0) GTEST_SKIP() << "skipped: no GPU (" << device_description() << ")"

// A causal bf16 case with Sq != Sk and tile-breaking sizes; inputs exact in bf16.
struct Case {
  AttnParams p;
  std::vector<float> q, k, v, dout;
  std::vector<uint8_t> mask;

  explicit Case(Precision precision, int64_t sq = 130, int64_t sk = 200, int64_t d = 64) {
    p.batch = 1;
    p.heads = 2;
    p.kv_heads = 1;
    p.seqlen_q = sq;
    p.seqlen_k = sk;
    p.head_dim = p.head_dim_v = d;
    p.scale = 1.0 / std::sqrt(static_cast<double>(d));
    p.causal = true;
    p.causal_align = CausalAlign::bottom_right;
    p.precision = precision;
    const auto fill = [](std::vector<float>& x, int64_t n, uint32_t seed) {
      x.resize(static_cast<size_t>(n));
      for (int64_t e = 0; e < n; ++e) {
        seed = seed * 1664525u + 1013904223u;
        x[static_cast<size_t>(e)] = static_cast<float>(static_cast<int>(seed >> 24) - 128) / 64.0f;
      }
    };
    fill(q, 2 * sq * d, 1);
    fill(k, sk * d, 2);
    fill(v, sk * d, 3);
    fill(dout, 2 * sq * d, 4);
  }
  CpuAttnInputs inputs() const { return {q.data(), k.data(), v.data(), dout.data()}; }
};

// Traced CUDA run and traced CPU run of the same case.
struct Both {
  CudaOutputs gpu;
  CudaTrace gpu_trace;
  CpuAttnResult cpu;
  CpuTrace cpu_trace;
};

Both run_both(const Case& c) {
  Both r;
  CudaAttention run(c.p, c.inputs(), true);
  run.forward();
  run.backward();
  r.gpu = run.outputs();
  r.gpu_trace = run.trace();
  CpuAttnOptions options;
  options.trace = &r.cpu_trace;
  r.cpu = cpu_attention(c.p, options, c.inputs());
  return r;
}

double max_rel(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-6;
  for (size_t e = 0; e < b.size(); ++e) scale = std::max(scale, std::abs(double{b[e]}));
  for (size_t e = 0; e < b.size(); ++e) worst = std::max(worst, std::abs(double{a[e]} - b[e]));
  return worst / scale;
}

TEST(CudaTrace, rows_tiles_and_norms_match_cpu_trace_causal_br_sq130_sk200_bf16) {
  SKIP_WITHOUT_GPU();
  const Both r = run_both(Case(Precision::bf16));
  EXPECT_LE(max_rel(r.gpu_trace.m, r.cpu_trace.forward.m), 1e-5);
  EXPECT_LE(max_rel(r.gpu_trace.l, r.cpu_trace.forward.l), 1e-4);
  EXPECT_LE(max_rel(r.gpu_trace.lse, r.cpu_trace.forward.lse), 1e-5);
  EXPECT_LE(max_rel(r.gpu_trace.d, r.cpu_trace.backward.d), 1e-2);
  EXPECT_LE(max_rel(r.gpu_trace.dq_row_norm, r.cpu_trace.backward.dq_row_norm), 1e-2);
  EXPECT_LE(max_rel(r.gpu_trace.dk_row_norm, r.cpu_trace.backward.dk_row_norm), 1e-2);
  ASSERT_EQ(r.gpu_trace.forward_tiles.size(), r.cpu_trace.forward.tiles.size());
  ASSERT_EQ(r.gpu_trace.backward_tiles.size(), r.cpu_trace.backward.tiles.size());
  for (size_t e = 0; e < r.gpu_trace.forward_tiles.size(); ++e) {
    const TileStats &g = r.gpu_trace.forward_tiles[e], &c = r.cpu_trace.forward.tiles[e];
    EXPECT_EQ(g.computed, c.computed) << "forward tile " << e;
    EXPECT_EQ(g.masked, c.masked) << "forward tile " << e;
    EXPECT_NEAR(g.max_abs_s, c.max_abs_s, 1e-4f * (1 + c.max_abs_s)) << "forward tile " << e;
    EXPECT_EQ(g.s.total() + g.p.total() + g.acc.total(), 0) << "forward tile " << e;
    EXPECT_EQ(r.gpu_trace.backward_tiles[e].computed, r.cpu_trace.backward.tiles[e].computed) << e;
  }
  for (int64_t n : r.gpu_trace.forward_provenance) EXPECT_EQ(n, 0);
  for (int64_t n : r.gpu_trace.backward_provenance) EXPECT_EQ(n, 0);
}

TEST(CudaTrace, nan_in_q_row_counts_as_input_like_cpu_f16) {
  SKIP_WITHOUT_GPU();
  Case c(Precision::f16);
  c.q[5 * 64 + 3] = std::nanf("");  // head 0, query row 5
  const Both r = run_both(c);
  std::vector<int64_t> cpu_counts(9, 0);
  for (Provenance p : r.cpu_trace.forward.o_provenance) ++cpu_counts[static_cast<size_t>(p)];
  for (Provenance p : r.cpu_trace.forward.lse_provenance) ++cpu_counts[static_cast<size_t>(p)];
  cpu_counts[0] = 0;  // finite elements are not counted on the GPU
  const size_t input = static_cast<size_t>(Provenance::input);
  EXPECT_EQ(r.gpu_trace.forward_provenance[input], 64 + 1);  // O row 5 and its LSE
  EXPECT_EQ(r.gpu_trace.forward_provenance, cpu_counts);
  EXPECT_TRUE(std::isnan(r.gpu.o[5 * 64]));
  EXPECT_FALSE(std::isnan(r.gpu.o[6 * 64]));
  EXPECT_GE(r.gpu_trace.backward_provenance[input], 64);  // dQ row 5 at least
}

TEST(CudaTrace, fully_masked_row_safe_fill_gives_zero_and_neg_inf_gives_nan) {
  SKIP_WITHOUT_GPU();
  for (MaskFill fill : {MaskFill::safe, MaskFill::neg_inf}) {
    Case c(Precision::f32, 97, 97, 32);
    c.p.causal = false;
    c.mask.assign(97 * 97, 1);
    for (int64_t j = 0; j < 97; ++j) c.mask[static_cast<size_t>(40 * 97 + j)] = 0;  // row 40
    c.p.mask = c.mask.data();
    c.p.mask_strides = {0, 0, 97, 1};
    c.p.mask_fill = fill;
    const Both r = run_both(c);
    const float o = r.gpu.o[40 * 32], lse = r.gpu.lse[40], dq = r.gpu.dq[40 * 32];
    if (fill == MaskFill::safe) {
      EXPECT_EQ(o, 0.0f);
      EXPECT_EQ(lse, -kInf);
      EXPECT_EQ(dq, 0.0f);
    } else {
      EXPECT_TRUE(std::isnan(o));
      EXPECT_TRUE(std::isnan(lse));
      const size_t code = static_cast<size_t>(Provenance::fully_masked_row);
      EXPECT_EQ(r.gpu_trace.forward_provenance[code], 2 * (32 + 1));  // row 40 of both heads
    }
    EXPECT_EQ(r.gpu.o.size(), r.cpu.o.size());
    EXPECT_LE(max_rel(r.gpu.o, r.cpu.o), 1e-5) << "fill " << static_cast<int>(fill);
  }
}

TEST(CudaTrace, instrumentation_leaves_o_lse_dk_dv_bit_identical_bf16) {
  SKIP_WITHOUT_GPU();
  const Case c(Precision::bf16);
  CudaOutputs out[2];
  for (int traced = 0; traced < 2; ++traced) {
    CudaAttention run(c.p, c.inputs(), traced == 1);
    run.forward();
    run.backward();
    out[traced] = run.outputs();
  }
  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  EXPECT_TRUE(same_bits(out[0].o, out[1].o));
  EXPECT_TRUE(same_bits(out[0].lse, out[1].lse));
  EXPECT_TRUE(same_bits(out[0].dk, out[1].dk));
  EXPECT_TRUE(same_bits(out[0].dv, out[1].dv));
  EXPECT_LE(max_rel(out[0].dq, out[1].dq), 1e-2);  // fp32 atomics: order may differ
}

TEST(CudaPooled, s_and_p_cells_match_cpu_pooled_causal_br_head1_7x9_bf16) {
  SKIP_WITHOUT_GPU();
  const Case c(Precision::bf16);
  CudaAttention run(c.p, c.inputs(), false);
  run.forward();
  const MatrixSelection sp{true, true, false, false};
  const MatrixWindow window{3, 129, 10, 200};
  const PooledHeadMatrices gpu = run.pooled_matrices(0, 1, 7, 9, window, sp);
  const PooledHeadMatrices cpu = cpu_pooled_matrices(c.p, {}, c.inputs(), 0, 1, 7, 9, window, sp);
  EXPECT_EQ(gpu.row_edges, cpu.row_edges);
  EXPECT_EQ(gpu.col_edges, cpu.col_edges);
  const std::pair<const PooledMatrix*, const PooledMatrix*> mats[] = {{&gpu.s, &cpu.s},
                                                                      {&gpu.p, &cpu.p}};
  for (const auto& [g, h] : mats) {
    EXPECT_EQ(g->finite, h->finite);
    EXPECT_EQ(g->masked, h->masked);
    EXPECT_EQ(g->nan, h->nan);
    EXPECT_EQ(g->neg_inf, h->neg_inf);
    EXPECT_LE(max_rel(g->max, h->max), 1e-4);
    EXPECT_LE(max_rel(g->min, h->min), 1e-4);
    EXPECT_LE(max_rel(g->mean, h->mean), 1e-4);
  }
  EXPECT_THROW(run.pooled_matrices(0, 0, 4, 4, {}, {true, true, true, false}),
               std::invalid_argument);
}

}  // namespace
}  // namespace attnscope::cuda
