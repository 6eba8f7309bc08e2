// CPU tests of the CUDA kernels' shared host/device code, compiled by g++ and run everywhere:
// fp16 / bf16 rounding against kernels/precision.h, masking and causal alignment against
// attn_params.h, softcap, NaN-propagating max, non-finite classes, the shared-memory layouts, the
// support check and the backward's tile sequence against the CPU stepper's plan.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "kernels/cpu/backward_stepper.h"
#include "kernels/cuda/cuda_attention.h"
#include "kernels/cuda/device_math.h"
#include "kernels/cuda/tile_layout.h"
#include "kernels/precision.h"

namespace attnscope::cuda {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(CudaDeviceMath, half_and_bf16_rounding_match_cpu_on_every_65537th_bit_pattern) {
  int64_t checked = 0;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 65537) {
    const float x = float_of(static_cast<uint32_t>(u));
    ASSERT_EQ(to_half_bits(x), float_to_half_bits(x)) << std::hex << u;
    ASSERT_EQ(to_bf16_bits(x), float_to_bf16_bits(x)) << std::hex << u;
    const uint16_t h = static_cast<uint16_t>(u);
    const float a = from_half_bits(h), b = half_bits_to_float(h);
    ASSERT_TRUE(bits_of(a) == bits_of(b) || (std::isnan(a) && std::isnan(b))) << std::hex << h;
    ++checked;
  }
  EXPECT_EQ(checked, 65536);
}

TEST(CudaDeviceMath, rounding_edge_values_fp16_overflow_and_ties) {
  EXPECT_EQ(round_to_precision(Precision::f16, 65504.0f), 65504.0f);
  EXPECT_EQ(round_to_precision(Precision::f16, 65519.0f), 65504.0f);
  EXPECT_EQ(round_to_precision(Precision::f16, 65520.0f), kInf);
  EXPECT_EQ(round_to_precision(Precision::f16, -1e9f), -kInf);
  EXPECT_EQ(round_to_precision(Precision::bf16, 1.0f + 1.0f / 256), 1.0f);  // tie to even
  EXPECT_EQ(round_to_precision(Precision::bf16, 1.0f + 3.0f / 256), 1.0f + 4.0f / 256);
  EXPECT_EQ(round_to_precision(Precision::f16, 5.9604645e-8f), 5.9604645e-8f);  // 2^-24
  EXPECT_EQ(round_to_precision(Precision::f32, 0.1f), 0.1f);
  EXPECT_TRUE(std::isnan(round_to_precision(Precision::bf16, std::nanf(""))));
}

TEST(CudaDeviceMath, causal_alignment_matches_attn_params_both_ways) {
  for (CausalAlign align : {CausalAlign::top_left, CausalAlign::bottom_right}) {
    AttnParams p;
    p.causal = true;
    p.causal_align = align;
    p.seqlen_q = 17;
    p.seqlen_k = 97;
    const int64_t shift = causal_shift(align == CausalAlign::bottom_right, 17, 97);
    for (int64_t i = 0; i < 17; ++i) {
      for (int64_t j = 0; j < 97; ++j)
        ASSERT_EQ(j > i + shift, causal_hides(p, i, j)) << i << "," << j;
    }
  }
  EXPECT_EQ(causal_shift(true, 97, 17), -80);
  EXPECT_TRUE(tile_causally_hidden(true, 0, 0, 64, 64));
  EXPECT_FALSE(tile_causally_hidden(true, 0, 64, 64, 64));
  EXPECT_FALSE(tile_causally_hidden(true, 80, 0, 17, 64));  // bottom-right sq17 sk97
  EXPECT_FALSE(tile_causally_hidden(false, 0, 0, 64, 64));
}

TEST(CudaDeviceMath, tile_extent_and_broadcast_offset) {
  EXPECT_EQ(tile_extent(97, 64, 64), 33);
  EXPECT_EQ(tile_extent(128, 64, 64), 64);
  EXPECT_EQ(tile_extent(1, 0, 64), 1);
  const BroadcastStrides key_padding{97, 0, 0, 1};
  EXPECT_EQ(broadcast_offset(key_padding, 2, 5, 40, 7), 2 * 97 + 7);
}

TEST(CudaDeviceMath, pooled_cell_matches_cpu_edges) {
  for (int64_t size : {1, 7, 97, 1025, 16384}) {
    for (int64_t n : {1, 3, 64, 97, 1024}) {
      if (n > size) continue;
      for (int64_t e = 0; e < n; ++e) {
        for (int64_t x = e * size / n; x < (e + 1) * size / n; ++x) {
          ASSERT_EQ(pooled_cell(x, size, n), e) << "size " << size << " n " << n << " x " << x;
        }
      }
    }
  }
}

TEST(CudaDeviceMath, softcap_value_and_derivative) {
  float gf = -1;
  EXPECT_EQ(apply_softcap(3.5f, 0, 0, &gf), 3.5f);
  EXPECT_EQ(gf, 1.0f);
  const float th = std::tanh(20.0f / 5.0f);
  EXPECT_FLOAT_EQ(apply_softcap(20.0f, 5.0f, th, &gf), 5.0f * th);
  EXPECT_FLOAT_EQ(gf, 1.0f - th * th);
}

TEST(CudaDeviceMath, max_nan_propagates_and_softmax_base_of_empty_row_is_zero) {
  EXPECT_TRUE(std::isnan(max_nan(1.0f, std::nanf(""))));
  EXPECT_TRUE(std::isnan(max_nan(std::nanf(""), 1.0f)));
  EXPECT_EQ(max_nan(-kInf, 2.0f), 2.0f);
  EXPECT_EQ(max_nan(3.0f, 2.0f), 3.0f);
  EXPECT_EQ(softmax_base(-kInf), 0.0f);
  EXPECT_EQ(softmax_base(-4.0f), -4.0f);
  EXPECT_EQ(std::exp(-kInf - softmax_base(-kInf)), 0.0f);
}

TEST(CudaDeviceMath, nonfinite_class_and_ordered_int_order) {
  EXPECT_EQ(nonfinite_class(1.0f), 0);
  EXPECT_EQ(nonfinite_class(std::nanf("")), 1);
  EXPECT_EQ(nonfinite_class(kInf), 2);
  EXPECT_EQ(nonfinite_class(-kInf), 3);
  const std::vector<float> sorted = {-kInf, -1e30f, -2.5f, -0.0f, 0.0f, 1e-30f, 3.0f, 1e30f, kInf};
  for (size_t e = 0; e + 1 < sorted.size(); ++e) {
    EXPECT_LE(ordered_int(sorted[e]), ordered_int(sorted[e + 1])) << sorted[e];
    EXPECT_EQ(ordered_float(ordered_int(sorted[e])), sorted[e]);
  }
}

// Offsets in order, each buffer 128-byte aligned and ending before the next one starts.
void expect_disjoint(const std::vector<std::pair<int64_t, int64_t>>& buffers, int64_t total) {
  for (size_t e = 0; e < buffers.size(); ++e) {
    EXPECT_EQ(buffers[e].first % 128, 0) << "buffer " << e;
    const int64_t end = buffers[e].first + buffers[e].second;
    EXPECT_LE(end, e + 1 < buffers.size() ? buffers[e + 1].first : total) << "buffer " << e;
  }
}

TEST(CudaTileLayout, buffers_aligned_disjoint_with_wmma_leading_dims) {
  for (int es : {2, 4}) {
    for (int d : {16, 64, 112, 128}) {
      const int dv = d == 112 ? 32 : d;
      const ForwardLayout f(d, dv, es);
      expect_disjoint({{f.q, 64 * ld_t(d) * es},
                       {f.k, 64 * ld_t(d) * es},
                       {f.v, 64 * ld_t(dv) * es},
                       {f.s, 64 * ld_f(64) * 4},
                       {f.p, 64 * ld_t(64) * es},
                       {f.acc, 64 * ld_f(dv) * 4},
                       {f.rows, 4 * 64 * 4},
                       {f.cls, 64 * 64},
                       {f.accum, int64_t{sizeof(TileAccum)}}},
                      f.total);
      const BackwardLayout b(d, dv, es);
      expect_disjoint({{b.k, 64 * ld_t(d) * es},
                       {b.v, 64 * ld_t(dv) * es},
                       {b.q, 64 * ld_t(d) * es},
                       {b.dout, 64 * ld_t(dv) * es},
                       {b.s, 64 * ld_f(64) * 4},
                       {b.gf, 64 * ld_f(64) * 4},
                       {b.p, 64 * ld_f(64) * 4},
                       {b.lo, 64 * ld_t(64) * es},
                       {b.dk, 64 * ld_f(d) * 4},
                       {b.dv, 64 * ld_f(dv) * 4},
                       {b.patch, 4 * 256 * 4},
                       {b.rows, 4 * 64 * 4},
                       {b.cls, 64 * 64},
                       {b.accum, int64_t{sizeof(TileAccum)}}},
                      b.total);
      EXPECT_EQ(ld_t(d) % 8, 0);
      EXPECT_EQ(ld_f(dv) % 4, 0);
    }
  }
  EXPECT_EQ(pad16(59), 64);
  EXPECT_EQ(pad16(111), 112);
  EXPECT_EQ(pad16(128), 128);
}

TEST(CudaSupport, reasons_name_precision_and_shared_memory) {
  AttnParams p;
  p.head_dim = p.head_dim_v = 128;
  p.precision = Precision::f64;
  EXPECT_NE(unsupported_reason(p).find("not f64"), std::string::npos);
  p.precision = Precision::bf16;
  EXPECT_EQ(unsupported_reason(p), "");
  EXPECT_LE(backward_shared_bytes(p), 232448);
  p.precision = Precision::f32;
  EXPECT_NE(unsupported_reason(p).find("shared memory"), std::string::npos)
      << unsupported_reason(p);
  p.head_dim = p.head_dim_v = 64;
  EXPECT_EQ(unsupported_reason(p), "");
  p.kv_heads = 3;
  p.heads = 4;
  EXPECT_NE(unsupported_reason(p).find("kv_heads"), std::string::npos);
}

// The CUDA backward visits the computed tiles of a head in the CPU stepper's order.
TEST(CudaTileSequence, causal_s200_matches_cpu_stepper_plan) {
  for (CausalAlign align : {CausalAlign::top_left, CausalAlign::bottom_right}) {
    AttnParams p;
    p.seqlen_q = 130;
    p.seqlen_k = 200;
    p.head_dim = p.head_dim_v = 16;
    p.scale = 0.25;
    p.causal = true;
    p.causal_align = align;
    p.precision = Precision::f32;
    std::vector<float> q(130 * 16, 0.5f), k(200 * 16, 0.25f), v(200 * 16, 1.0f);
    const CpuAttnInputs in{q.data(), k.data(), v.data(), nullptr};
    const CpuAttnResult fwd = cpu_attention(p, {}, in);
    const BackwardStepper stepper(p, {}, in, {fwd.o.data(), fwd.m.data(), fwd.l.data()}, 0, 0);
    std::vector<std::pair<int64_t, int64_t>> cpu_tiles, gpu_tiles;
    for (int64_t n = 0; n < stepper.size(); ++n) {
      const StepInfo s = stepper.describe(n);
      if (s.stage == StepStage::score_tile) cpu_tiles.emplace_back(s.kv_tile, s.q_tile);
    }
    for (const CudaStepTile& t : backward_tile_sequence(p, {}, {})) {
      if (!t.skipped) gpu_tiles.emplace_back(t.kv_tile, t.q_tile);
    }
    EXPECT_EQ(gpu_tiles, cpu_tiles);
    EXPECT_EQ(backward_tile_sequence(p, {}, {}).size(), 4u * 3u);
  }
}

TEST(CudaDevice, count_and_description_never_throw) {
  const int n = device_count();
  EXPECT_GE(n, 0);
  const std::string text = device_description();
  EXPECT_FALSE(text.empty());
  if (n == 0) {
    EXPECT_NE(text.find("no CUDA device"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace attnscope::cuda
