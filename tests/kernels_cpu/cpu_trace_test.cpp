// The CPU kernels' instrumentation (CpuAttnOptions::trace): outputs identical with it on (NaN
// payloads aside), provenance codes on crafted pathologies, exact per-tile stats and gradient
// norms, thread count independence, and a printout of its cost at B*H = 8, S = 2048, D = 64.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>
#include <vector>

#include "cpu_test_util.h"
#include "kernels/attn_names.h"
#include "kernels/precision.h"

namespace attnscope::test {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
using Want = std::function<Provenance(int64_t index)>;

// Bit for bit, except that any NaN matches any NaN: the sign and payload of a NaN depend on
// which operand order the compiler picked in each instantiation of a vector loop (the traced
// exp pass is its own), and IEEE 754 leaves them open.
bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const bool both_nan = std::isnan(a[i]) && std::isnan(b[i]);
    if (!both_nan && std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

Want all(Provenance p) {
  return [p](int64_t) { return p; };
}

// Finite entries of x carry Provenance::finite, non-finite ones want(index); the codes are
// empty exactly when x is all finite.
void expect_codes(const std::vector<float>& x, const std::vector<Provenance>& codes,
                  const Want& want, const char* what) {
  const bool all_finite = count_nonfinite(x) == 0;
  ASSERT_EQ(codes.size(), all_finite ? 0 : x.size()) << what;
  int64_t mismatches = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const auto at = static_cast<int64_t>(i);
    const Provenance expected = std::isfinite(x[i]) ? Provenance::finite : want(at);
    if (provenance_at(codes, at) != expected && mismatches++ == 0) {
      ADD_FAILURE() << what << "[" << i << "] is " << provenance_name(provenance_at(codes, at))
                    << ", want " << provenance_name(expected);
    }
  }
  EXPECT_EQ(mismatches, 0) << what;
}

// Every non-finite entry of o, lse and dq is `row`, of dk and dv is `col`.
void expect_all_codes(const CpuAttnResult& r, const CpuTrace& tr, const Want& row,
                      const Want& col) {
  expect_codes(r.o, tr.forward.o_provenance, row, "o");
  expect_codes(r.lse, tr.forward.lse_provenance, row, "lse");
  expect_codes(r.dq, tr.backward.dq_provenance, row, "dq");
  expect_codes(r.dk, tr.backward.dk_provenance, col, "dk");
  expect_codes(r.dv, tr.backward.dv_provenance, col, "dv");
}

// Every field of a tile's stats, in one comparable list.
std::vector<double> fields(const TileStats& t) {
  std::vector<double> f{t.max_abs_s, t.max_exp_arg, static_cast<double>(t.masked),
                        static_cast<double>(t.computed)};
  for (const NonfiniteCount& n : {t.s, t.p, t.acc, t.dp, t.ds, t.dq, t.dk, t.dv}) {
    f.insert(f.end(), {static_cast<double>(n.nan), static_cast<double>(n.pos_inf),
                       static_cast<double>(n.neg_inf)});
  }
  return f;
}

void expect_outputs_identical(const CpuAttnResult& off, const CpuAttnResult& on) {
  for (auto field :
       {&CpuAttnResult::o, &CpuAttnResult::lse, &CpuAttnResult::m, &CpuAttnResult::l,
        &CpuAttnResult::d, &CpuAttnResult::dq, &CpuAttnResult::dk, &CpuAttnResult::dv}) {
    EXPECT_TRUE(same_values(off.*field, on.*field));
  }
}

TEST(TraceOnOff, outputs_bit_identical_gqa_causal_mask_bias_softcap_nan_fused_unfused) {
  CaseConfig c;
  c.heads = 4;
  c.kv_heads = 2;
  c.sq = 150;
  c.sk = 170;
  c.d = 32;
  c.causal = true;
  c.mask = MaskKind::full;
  c.bias = true;
  c.bias_neg_inf = true;
  c.softcap = 5.0;
  for (Precision p : {Precision::f32, Precision::bf16, Precision::f16}) {
    c.precision = p;
    TestCase t = make_case(c);
    t.q[100] = kNaN;
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      CpuTrace trace;
      const CpuAttnResult off = run_cpu(t, mode);
      const CpuAttnResult on = run_cpu_traced(t, mode, &trace);
      EXPECT_TRUE(trace.forward.valid && trace.backward.valid);
      expect_outputs_identical(off, on);
    }
  }
}

// An untraced causal unfused run stops its products at the keys a row block can see (P is 0
// beyond, every input finite); the traced run multiplies every key out: the same bits, for
// top-left and bottom-right alignment (rows that see no key too), every fill, and dropout.
TEST(TraceOnOff, untraced_unfused_causal_run_that_skips_hidden_keys_is_bit_identical) {
  CaseConfig c;
  c.heads = 4;
  c.kv_heads = 2;
  c.d = 32;
  c.causal = true;
  c.bias = true;
  for (const auto& [sq, sk, align] : {std::tuple{200, 230, CausalAlign::top_left},
                                      std::tuple{230, 150, CausalAlign::bottom_right}}) {
    c.sq = sq;
    c.sk = sk;
    c.align = align;
    for (MaskFill fill : {MaskFill::safe, MaskFill::neg_inf, MaskFill::neg_1e9}) {
      c.fill = fill;
      for (Precision p : {Precision::f32, Precision::bf16, Precision::f16}) {
        c.precision = p;
        for (bool dropout : {false, true}) {
          c.dropout = dropout;
          c.dropout_p = dropout ? 0.2 : 0.0;
          const TestCase t = make_case(c);
          CpuTrace trace;
          const CpuAttnResult off = run_cpu(t, Mode::unfused);
          const CpuAttnResult on = run_cpu_traced(t, Mode::unfused, &trace);
          SCOPED_TRACE(std::to_string(sq) + "x" + std::to_string(sk) + " fill " +
                       std::to_string(static_cast<int>(fill)) + " " + precision_name(p) +
                       (dropout ? " dropout" : ""));
          expect_outputs_identical(off, on);
        }
      }
    }
  }
}

// Dropout (a NaN behind a dropped key too) and P from the LSE leave the outputs untouched by
// the trace, and every non-finite output element still gets a cause.
TEST(TraceOnOff, outputs_bit_identical_with_dropout_and_from_lse_every_nonfinite_coded) {
  CaseConfig c;
  c.heads = 2;
  c.kv_heads = 1;
  c.sq = 150;
  c.sk = 170;
  c.d = 32;
  c.causal = true;
  c.bias = true;
  c.dropout = true;
  c.dropout_p = 0.3;
  c.backward_p = BackwardP::from_lse;
  for (Precision p : {Precision::f32, Precision::bf16}) {
    c.precision = p;
    TestCase t = make_case(c);
    for (int64_t i = 0; i < c.sq; ++i) t.keep[static_cast<size_t>(i * c.sk + 120)] = 0;
    t.v[static_cast<size_t>(120 * c.d)] = kNaN;
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      CpuTrace trace;
      const CpuAttnResult off = run_cpu(t, mode);
      const CpuAttnResult on = run_cpu_traced(t, mode, &trace);
      expect_outputs_identical(off, on);
      ASSERT_GT(count_nonfinite(on.o), 0);
      const auto coded = [](const std::vector<float>& x, const std::vector<Provenance>& codes) {
        int64_t bad = 0;
        for (size_t e = 0; e < x.size(); ++e) {
          bad += std::isfinite(x[e]) !=
                 (provenance_at(codes, static_cast<int64_t>(e)) == Provenance::finite);
        }
        return bad;
      };
      EXPECT_EQ(coded(on.o, trace.forward.o_provenance), 0);
      EXPECT_EQ(coded(on.dq, trace.backward.dq_provenance), 0);
      EXPECT_EQ(coded(on.dk, trace.backward.dk_provenance), 0);
      EXPECT_EQ(coded(on.dv, trace.backward.dv_provenance), 0);
    }
  }
}

// Fused and unfused (whose one-head backward splits its stages over the workers).
TEST(TraceOnOff, trace_is_thread_count_independent_fused_unfused) {
  CaseConfig c;
  c.heads = c.kv_heads = 1;
  c.sq = c.sk = 400;
  c.causal = true;
  TestCase t = make_case(c);
  t.k[static_cast<size_t>(300 * c.d)] = kNaN;
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    SCOPED_TRACE(mode == Mode::fused ? "fused" : "unfused");
    CpuTrace one, three;
    run_cpu_traced(t, mode, &one, 1);
    run_cpu_traced(t, mode, &three, 3);
    ASSERT_EQ(one.backward.tiles.size(), three.backward.tiles.size());
    for (size_t i = 0; i < one.backward.tiles.size(); ++i) {
      const TileStats &a = one.backward.tiles[i], &b = three.backward.tiles[i];
      EXPECT_EQ(fields(a), fields(b)) << "tile " << i;
    }
    EXPECT_EQ(one.backward.dq_provenance, three.backward.dq_provenance);
    EXPECT_EQ(one.backward.dk_provenance, three.backward.dk_provenance);
    EXPECT_TRUE(std::memcmp(one.backward.dq_head_norm.data(), three.backward.dq_head_norm.data(),
                            sizeof(double)) == 0);
  }
}

// A trace reused across runs (it keeps its arrays' storage) holds exactly what a fresh one
// holds: a larger NaN case first, then a smaller clean one.
TEST(TraceOnOff, a_reused_trace_equals_a_fresh_one_after_a_larger_run) {
  CaseConfig big;
  big.heads = 2;
  big.sq = big.sk = 300;
  TestCase bad = make_case(big);
  bad.q[7] = kNaN;
  CaseConfig small;
  small.sq = 90;
  small.sk = 70;
  const TestCase clean = make_case(small);
  CpuTrace reused, fresh;
  run_cpu_traced(bad, Mode::fused, &reused);
  run_cpu_traced(clean, Mode::fused, &reused);
  run_cpu_traced(clean, Mode::fused, &fresh);
  const ForwardTrace &rf = reused.forward, &ff = fresh.forward;
  const BackwardTrace &rb = reused.backward, &fb = fresh.backward;
  EXPECT_TRUE(rf.valid && rb.valid);
  EXPECT_TRUE(rf.m == ff.m && rf.l == ff.l && rf.lse == ff.lse && rf.o_max_abs == ff.o_max_abs);
  EXPECT_TRUE(rf.o_provenance == ff.o_provenance && rf.lse_provenance == ff.lse_provenance);
  EXPECT_TRUE(rb.d == fb.d && rb.dq_row_norm == fb.dq_row_norm &&
              rb.dk_row_norm == fb.dk_row_norm && rb.dv_row_norm == fb.dv_row_norm);
  EXPECT_TRUE(rb.dq_head_norm == fb.dq_head_norm && rb.dk_head_norm == fb.dk_head_norm &&
              rb.dv_head_norm == fb.dv_head_norm);
  EXPECT_TRUE(rb.dq_provenance == fb.dq_provenance && rb.dk_provenance == fb.dk_provenance &&
              rb.dv_provenance == fb.dv_provenance);
  ASSERT_EQ(rf.tiles.size(), ff.tiles.size());
  ASSERT_EQ(rb.tiles.size(), fb.tiles.size());
  for (size_t i = 0; i < rb.tiles.size(); ++i) {
    EXPECT_EQ(fields(rf.tiles[i]), fields(ff.tiles[i])) << "fwd tile " << i;
    EXPECT_EQ(fields(rb.tiles[i]), fields(fb.tiles[i])) << "bwd tile " << i;
  }
}

// Inputs not yet of the precision are rounded before the run, and the finite checks and the
// trace read the rounded rows' largest magnitudes: a run on them equals one on inputs rounded
// beforehand, trace included, also where rounding turns a finite K entry (bf16, fp16) or dO
// entry (fp16) into inf. D = 37 leaves a tail past the vector lanes.
TEST(TraceOnOff, unrounded_inputs_run_as_inputs_rounded_beforehand_bf16_f16_fused_unfused) {
  CaseConfig c;
  c.heads = 2;
  c.kv_heads = 1;
  c.sq = 150;
  c.sk = 170;
  c.d = 37;
  c.causal = true;
  TestCase raw = make_case(c);  // fp32 values
  raw.k[static_cast<size_t>(100 * c.d + 36)] = std::numeric_limits<float>::max();
  raw.dout[static_cast<size_t>(20 * c.d + 5)] = 70000.0f;  // fp16: inf; bf16: 70144
  for (Precision p : {Precision::bf16, Precision::f16}) {
    raw.config.precision = p;
    TestCase rounded = raw;
    for (std::vector<float>* x : {&rounded.q, &rounded.k, &rounded.v, &rounded.dout}) {
      for (float& e : *x) e = static_cast<float>(round_to(p, e));
    }
    ASSERT_TRUE(std::isinf(rounded.k[static_cast<size_t>(100 * c.d + 36)]));
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      CpuTrace a, b;
      const CpuAttnResult from_raw = run_cpu_traced(raw, mode, &a);
      const CpuAttnResult from_rounded = run_cpu_traced(rounded, mode, &b);
      expect_outputs_identical(from_rounded, from_raw);
      EXPECT_TRUE(a.forward.o_provenance == b.forward.o_provenance &&
                  a.forward.lse_provenance == b.forward.lse_provenance);
      EXPECT_TRUE(a.backward.dq_provenance == b.backward.dq_provenance &&
                  a.backward.dk_provenance == b.backward.dk_provenance &&
                  a.backward.dv_provenance == b.backward.dv_provenance);
      ASSERT_EQ(a.backward.tiles.size(), b.backward.tiles.size());
      for (size_t i = 0; i < a.backward.tiles.size(); ++i) {
        EXPECT_EQ(fields(a.forward.tiles[i]), fields(b.forward.tiles[i])) << "fwd tile " << i;
        EXPECT_EQ(fields(a.backward.tiles[i]), fields(b.backward.tiles[i])) << "bwd tile " << i;
      }
    }
  }
}

// Causal Sq = Sk = 200: rows i >= 150 see the NaN in k_150; every dQ_i reads k_150 (0 * NaN);
// dK_150, dV_150 hold their own bad input, every other dK_j / dV_j is poisoned by those rows.
TEST(Provenance, nan_in_key_row_150_is_input_on_rows_seeing_it_propagated_on_other_kv_rows) {
  CaseConfig c;
  c.sq = c.sk = 200;
  c.causal = true;
  TestCase t = make_case(c);
  t.k[static_cast<size_t>(150 * c.d + 2)] = kNaN;
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    CpuTrace tr;
    const CpuAttnResult r = run_cpu_traced(t, mode, &tr);
    EXPECT_EQ(count_nonfinite(r.o), 50 * c.d);  // rows 150..199
    expect_all_codes(r, tr, all(Provenance::input), [&](int64_t e) {
      return e / c.d == 150 ? Provenance::input : Provenance::propagated;
    });
    EXPECT_GT(count_nonfinite(r.dv), c.d);
  }
}

TEST(Provenance, qk_overflow_in_unfused_f16_is_score_overflow_and_fused_f16_stays_finite) {
  const TestCase t = qk_overflow_case(Precision::f16);
  CpuTrace tr;
  const CpuAttnResult r = run_cpu_traced(t, Mode::unfused, &tr);
  EXPECT_EQ(count_nonfinite(r.o), t.config.dv);
  expect_all_codes(r, tr, all(Provenance::score_overflow), all(Provenance::propagated));
  EXPECT_EQ(tr.forward.tiles[0].s.pos_inf, 1);
  EXPECT_EQ(tr.forward.tiles[0].s.nan, 0);

  const CpuAttnResult fused = run_cpu_traced(t, Mode::fused, &tr);
  expect_all_codes(fused, tr, all(Provenance::finite), all(Provenance::finite));
  EXPECT_EQ(tr.forward.tiles[0].s.total(), 0);
  EXPECT_EQ(tr.forward.tiles[0].max_abs_s, 12800.0f);
}

TEST(Provenance, neg_1e9_fill_of_fully_masked_row_in_unfused_f16_is_mask_fill) {
  const TestCase t = fully_masked_row_case(MaskFill::neg_1e9, Precision::f16);
  CpuTrace tr;
  const CpuAttnResult r = run_cpu_traced(t, Mode::unfused, &tr);
  EXPECT_EQ(count_nonfinite(r.o), t.config.dv);
  expect_all_codes(r, tr, all(Provenance::mask_fill), all(Provenance::propagated));
  const CpuAttnResult fused = run_cpu_traced(t, Mode::fused, &tr);
  expect_all_codes(fused, tr, all(Provenance::finite), all(Provenance::finite));
}

// The same cause without a mask: bottom-right causal with Sq > Sk hides every key from the first
// Sq - Sk rows, which share their kv tiles with rows that see some (the staircase the trace
// scans without looking at masked scores).
TEST(Provenance, neg_1e9_fill_of_causally_empty_rows_in_unfused_f16_is_mask_fill) {
  CaseConfig c;
  c.sq = 70;
  c.sk = 67;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  c.fill = MaskFill::neg_1e9;
  c.precision = Precision::f16;
  const TestCase t = make_case(c);
  CpuTrace tr;
  const CpuAttnResult r = run_cpu_traced(t, Mode::unfused, &tr);
  const int64_t dv = c.d;  // rows 0..2 of O are NaN
  EXPECT_EQ(count_nonfinite(r.o), 3 * dv);
  expect_codes(r.o, tr.forward.o_provenance, all(Provenance::mask_fill), "o");
  expect_codes(r.lse, tr.forward.lse_provenance, all(Provenance::mask_fill), "lse");
  int32_t masked = 0;  // tile (0, 0): row i sees keys j <= i - 3
  for (int32_t i = 0; i < 64; ++i) masked += 64 - std::max(0, i - 2);
  EXPECT_EQ(tr.forward.tiles[0].masked, masked);
}

TEST(Provenance, neg_inf_fill_fully_masked_row_is_fully_masked_row_fused_unfused_f32_bf16) {
  for (Precision p : {Precision::f32, Precision::bf16}) {
    const TestCase t = fully_masked_row_case(MaskFill::neg_inf, p);
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      CpuTrace tr;
      const CpuAttnResult r = run_cpu_traced(t, mode, &tr);
      EXPECT_EQ(count_nonfinite(r.o), t.config.dv);
      expect_all_codes(r, tr, all(Provenance::fully_masked_row), all(Provenance::propagated));
    }
  }
}

TEST(Provenance, safe_fill_fully_masked_row_has_only_lse_neg_inf_coded_fully_masked_row) {
  const TestCase t = fully_masked_row_case(MaskFill::safe, Precision::f32);
  CpuTrace tr;
  const CpuAttnResult r = run_cpu_traced(t, Mode::fused, &tr);
  EXPECT_EQ(count_nonfinite(r.o) + count_nonfinite(r.dq) + count_nonfinite(r.dk), 0);
  EXPECT_EQ(count_nonfinite(r.lse), 1);
  EXPECT_EQ(tr.forward.lse_provenance[kMaskedRow], Provenance::fully_masked_row);
}

// dO row 0 = 60000 (fp16-representable) and v_0 = 1: dP_00 = 60000 * 64 leaves fp16's range
// (unfused: dP rounded; fused: dS = P (dP - D) rounded) while O and LSE stay finite.
TEST(Provenance, exploding_dout_in_f16_overflows_dq_as_grad_overflow_fused_and_unfused) {
  CaseConfig c;
  c.sq = c.sk = 17;
  c.d = 64;
  c.precision = Precision::f16;
  TestCase t = make_case(c);
  for (int64_t e = 0; e < c.d; ++e) {
    t.dout[static_cast<size_t>(e)] = 60000.0f;
    t.v[static_cast<size_t>(e)] = 1.0f;
  }
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    CpuTrace tr;
    const CpuAttnResult r = run_cpu_traced(t, mode, &tr);
    ASSERT_EQ(count_nonfinite(r.o) + count_nonfinite(r.lse), 0);
    EXPECT_GT(count_nonfinite(r.dq), 0);
    expect_all_codes(r, tr, all(Provenance::grad_overflow), all(Provenance::grad_overflow));
  }
}

// Number of (i, j) in the tile with j > i (causal, top-left).
int32_t causal_hidden(int64_t i0, int64_t rows, int64_t j0, int64_t cols) {
  int32_t n = 0;
  for (int64_t i = i0; i < i0 + rows; ++i) {
    for (int64_t j = j0; j < j0 + cols; ++j) n += j > i;
  }
  return n;
}

// Causal Sq = 70, Sk = 130 (2 x 3 tiles), D = Dv = 16, a NaN in q_5: row 5 of q tile 0 has 6
// visible NaN scores and NaN P / dS rows; the fused forward skips the hidden tiles (0, 1),
// (0, 2), (1, 2), the backward only (1, 2) (q tile 0 is not clean).
TEST(TileStats, causal_70x130_nan_query_row_counts_exact_fused) {
  CaseConfig c;
  c.sq = 70;
  c.sk = 130;
  c.causal = true;
  TestCase t = make_case(c);
  t.q[5 * 16] = kNaN;
  CpuTrace tr;
  run_cpu_traced(t, Mode::fused, &tr);
  ASSERT_EQ(tr.q_tiles, 2);
  ASSERT_EQ(tr.kv_tiles, 3);
  const int64_t D = 16;
  for (int64_t qt = 0; qt < 2; ++qt) {
    for (int64_t kt = 0; kt < 3; ++kt) {
      SCOPED_TRACE(testing::Message() << "tile " << qt << "," << kt);
      const int64_t rows = qt == 0 ? 64 : 6, cols = kt == 2 ? 2 : 64;
      const TileStats& f = tr.forward.tiles[static_cast<size_t>(tr.tile_index(0, 0, qt, kt))];
      const TileStats& b = tr.backward.tiles[static_cast<size_t>(tr.tile_index(0, 0, qt, kt))];
      const bool hidden = kt * 64 > qt * 64 + rows - 1;
      const int32_t masked = causal_hidden(qt * 64, rows, kt * 64, cols);
      EXPECT_EQ(f.computed, !hidden);
      EXPECT_EQ(b.computed, !(hidden && qt == 1));
      EXPECT_EQ(f.masked, masked);
      EXPECT_EQ(b.masked, masked);
      const bool nan_row = qt == 0 && (!hidden || b.computed);
      EXPECT_EQ(f.s.nan, qt == 0 && kt == 0 ? 6 : 0);
      EXPECT_EQ(f.p.nan, qt == 0 && !hidden ? cols : 0);
      EXPECT_EQ(f.acc.nan, qt == 0 && !hidden ? D : 0);
      EXPECT_EQ(b.s.nan, qt == 0 && kt == 0 ? 6 : 0);
      EXPECT_EQ(b.p.nan, nan_row ? cols : 0);
      EXPECT_EQ(b.dp.total(), 0);
      EXPECT_EQ(b.ds.nan, nan_row ? cols : 0);
      EXPECT_EQ(b.dq.nan, nan_row ? D : 0);
      // dK_j, dV_j of the kv tile went NaN at q tile 0 and stay NaN.
      EXPECT_EQ(b.dk.nan, b.computed ? cols * D : 0);
      EXPECT_EQ(b.dv.nan, b.computed ? cols * D : 0);
      EXPECT_EQ(f.s.pos_inf + f.s.neg_inf + b.s.pos_inf + b.s.neg_inf, 0);
    }
  }
}

// Sq = 64, Sk = 128, D = 16, a NaN in k_100 (kv tile 1): every row's max m is NaN, so P of kv
// tile 0 is NaN everywhere although its scores are finite, in the backward (which takes P
// against the final m) but not in the forward (whose running m is finite after tile 0).
TEST(TileStats, nan_key_in_kv_tile_1_makes_p_of_clean_kv_tile_0_nan_through_m_in_backward) {
  CaseConfig c;
  c.sq = 64;
  c.sk = 128;
  for (Precision p : {Precision::f32, Precision::bf16}) {
    c.precision = p;
    TestCase t = make_case(c);
    t.k[static_cast<size_t>(100 * c.d + 3)] = kNaN;
    for (Mode mode : {Mode::fused, Mode::unfused}) {
      SCOPED_TRACE(testing::Message() << precision_name(p) << " " << mode_name(mode));
      CpuTrace tr;
      run_cpu_traced(t, mode, &tr);
      const TileStats& f0 = tr.forward.tiles[static_cast<size_t>(tr.tile_index(0, 0, 0, 0))];
      const TileStats& b0 = tr.backward.tiles[static_cast<size_t>(tr.tile_index(0, 0, 0, 0))];
      const TileStats& b1 = tr.backward.tiles[static_cast<size_t>(tr.tile_index(0, 0, 0, 1))];
      EXPECT_EQ(f0.s.total() + b0.s.total(), 0);
      EXPECT_EQ(b1.s.nan, 64);
      EXPECT_EQ(b0.p.nan, 64 * 64);
      EXPECT_EQ(b1.p.nan, 64 * 64);
      if (mode == Mode::fused) {
        EXPECT_EQ(f0.p.total(), 0);
      }
    }
  }
}

// dK_j overflows in its fp32 accumulator from finite operands, at q tile 1 of 3 (Sq = 192,
// Sk = 128, D = 16, scale 1/4): K = 0, so S = 0 and P = 1/128; V_j = (+-1, 0, ...) alternating
// and dO_i = (4096, 0, ...), so O = 0, D = 0 and dS_ij = +-32; q_i = (1e36, 0, ...) on the rows
// of q tile 1 only. Each product is finite, the 64 of q tile 1 sum past FLT_MAX to +-inf in
// column 0 of every dK_j, and q tile 2 (q = 0) keeps it. dQ = 0 and dV stay finite.
TEST(TileStats, dk_overflowing_in_its_accumulator_counts_from_that_q_tile_on_f32_bf16) {
  CaseConfig c;
  c.sq = 192;
  c.sk = 128;
  for (Precision p : {Precision::f32, Precision::bf16}) {
    c.precision = p;
    TestCase t = make_case(c);
    for (std::vector<float>* x : {&t.q, &t.k, &t.v, &t.dout}) std::fill(x->begin(), x->end(), 0.0f);
    for (int64_t j = 0; j < c.sk; ++j) t.v[static_cast<size_t>(j * c.d)] = j % 2 == 0 ? 1 : -1;
    for (int64_t i = 0; i < c.sq; ++i) {
      t.dout[static_cast<size_t>(i * c.d)] = 4096.0f;
      if (i / 64 == 1) t.q[static_cast<size_t>(i * c.d)] = round_to(p, 1e36f);
    }
    CpuTrace tr;
    const CpuAttnResult r = run_cpu_traced(t, Mode::fused, &tr);
    ASSERT_EQ(count_nonfinite(r.dq) + count_nonfinite(r.dv), 0);
    EXPECT_EQ(count_nonfinite(r.dk), c.sk);
    for (int64_t qt = 0; qt < 3; ++qt) {
      for (int64_t kt = 0; kt < 2; ++kt) {
        SCOPED_TRACE(testing::Message() << precision_name(p) << " tile " << qt << "," << kt);
        const TileStats& b = tr.backward.tiles[static_cast<size_t>(tr.tile_index(0, 0, qt, kt))];
        EXPECT_EQ(b.ds.total() + b.dq.total() + b.dv.total(), 0);
        EXPECT_EQ(b.dk.pos_inf, qt == 0 ? 0 : 32);  // even keys: dS = +32
        EXPECT_EQ(b.dk.neg_inf, qt == 0 ? 0 : 32);
        EXPECT_EQ(b.dk.nan, 0);
      }
    }
    expect_codes(r.dk, tr.backward.dk_provenance, all(Provenance::grad_overflow), "dk");
  }
}

// Max |S| and masked count per tile against the fp64 reference, hidden(i, j) naming the masked
// scores; the forward's exp arguments are <= 0 and the backward's reach exactly 0 in some tile
// of every q tile (s - m at the row max).
void expect_tile_maxima_match_reference(const TestCase& t,
                                        const std::function<bool(int64_t, int64_t)>& hidden) {
  const CaseConfig& c = t.config;
  const ReferenceTrace ref = run_reference(t);
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    CpuTrace tr;
    run_cpu_traced(t, mode, &tr);
    for (int64_t qt = 0; qt < tr.q_tiles; ++qt) {
      float best_bwd_arg = -std::numeric_limits<float>::infinity();
      for (int64_t kt = 0; kt < tr.kv_tiles; ++kt) {
        SCOPED_TRACE(testing::Message() << mode_name(mode) << " tile " << qt << "," << kt);
        double want = 0;
        int32_t masked = 0;
        for (int64_t i = qt * 64; i < std::min<int64_t>(c.sq, (qt + 1) * 64); ++i) {
          for (int64_t j = kt * 64; j < std::min<int64_t>(c.sk, (kt + 1) * 64); ++j) {
            masked += hidden(i, j);
            if (!hidden(i, j))
              want = std::max(want, std::abs(ref.s[static_cast<size_t>(i * c.sk + j)]));
          }
        }
        const size_t idx = static_cast<size_t>(tr.tile_index(0, 0, qt, kt));
        EXPECT_NEAR(tr.forward.tiles[idx].max_abs_s, want, 1e-5 * want);
        EXPECT_EQ(tr.forward.tiles[idx].masked, masked);
        EXPECT_LE(tr.forward.tiles[idx].max_exp_arg, 0.0f);
        best_bwd_arg = std::max(best_bwd_arg, tr.backward.tiles[idx].max_exp_arg);
      }
      EXPECT_EQ(best_bwd_arg, 0.0f) << "q tile " << qt;
    }
  }
}

TEST(TileStats, max_abs_score_and_exp_argument_match_reference_mask_and_bias) {
  CaseConfig c;
  c.sq = 100;
  c.sk = 150;
  c.d = 32;
  c.mask = MaskKind::broadcast;
  c.bias = true;
  c.bias_neg_inf = true;
  const TestCase t = make_case(c);
  expect_tile_maxima_match_reference(t, [&](int64_t i, int64_t j) {
    const size_t e = static_cast<size_t>(i * c.sk + j);
    return t.mask[e] == 0 || std::isinf(t.bias[e]);
  });
}

// Causal only (bottom-right, key j hidden from query i iff j > i + 50): the tiles on the
// diagonal take the trace's per-row scan, the others its whole-tile maxima.
TEST(TileStats, max_abs_score_and_exp_argument_match_reference_causal) {
  CaseConfig c;
  c.sq = 100;
  c.sk = 150;
  c.d = 32;
  c.causal = true;
  c.align = CausalAlign::bottom_right;
  const TestCase t = make_case(c);
  expect_tile_maxima_match_reference(t, [](int64_t i, int64_t j) { return j > i + 50; });
}

// Both modes; three q tiles (the last one ragged) and two kv tiles.
TEST(Norms, gradient_norms_and_o_maxima_match_the_outputs_gqa_fused_unfused) {
  CaseConfig c;
  c.batch = 2;
  c.heads = 4;
  c.kv_heads = 2;
  c.sq = 140;
  c.sk = 90;
  c.d = 16;
  const TestCase t = make_case(c);
  const auto check = [](const std::vector<float>& x, int64_t heads, int64_t rows, int64_t dim,
                        const std::vector<float>& row_norm, const std::vector<double>& head_norm) {
    ASSERT_EQ(row_norm.size(), static_cast<size_t>(heads * rows));
    ASSERT_EQ(head_norm.size(), static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) {
      double total = 0;
      for (int64_t i = 0; i < rows; ++i) {
        double sq = 0;
        for (int64_t e = 0; e < dim; ++e) {
          sq += static_cast<double>(x[static_cast<size_t>((h * rows + i) * dim + e)]) *
                x[static_cast<size_t>((h * rows + i) * dim + e)];
        }
        EXPECT_EQ(row_norm[static_cast<size_t>(h * rows + i)], static_cast<float>(std::sqrt(sq)));
        total += sq;
      }
      EXPECT_NEAR(head_norm[static_cast<size_t>(h)], std::sqrt(total), 1e-12 * std::sqrt(total));
    }
  };
  for (Mode mode : {Mode::fused, Mode::unfused}) {
    SCOPED_TRACE(mode_name(mode));
    CpuTrace tr;
    const CpuAttnResult r = run_cpu_traced(t, mode, &tr);
    check(r.dq, 8, 140, 16, tr.backward.dq_row_norm, tr.backward.dq_head_norm);
    check(r.dk, 4, 90, 16, tr.backward.dk_row_norm, tr.backward.dk_head_norm);
    check(r.dv, 4, 90, 16, tr.backward.dv_row_norm, tr.backward.dv_head_norm);
    ASSERT_EQ(tr.forward.o_max_abs.size(), size_t{8 * 140});
    for (size_t row = 0; row < tr.forward.o_max_abs.size(); ++row) {
      float want = 0;
      for (int64_t e = 0; e < 16; ++e) want = std::max(want, std::abs(r.o[row * 16 + e]));
      EXPECT_EQ(tr.forward.o_max_abs[row], want);
    }
  }
}

TEST(Timing, trace_overhead_fused_fwd_bwd_bh8_s2048_d64_f32_2threads_prints_ratio) {
  CaseConfig c;
  c.heads = c.kv_heads = 8;
  c.sq = c.sk = 2048;
  c.d = 64;
  const TestCase t = make_case(c);
  using clock = std::chrono::steady_clock;
  const auto time = [&](CpuTrace* trace) {
    const auto t0 = clock::now();
    run_cpu_traced(t, Mode::fused, trace, 2);
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  CpuTrace trace;
  double off = 1e30, on = 1e30;
  for (int rep = 0; rep < 2; ++rep) {
    off = std::min(off, time(nullptr));
    on = std::min(on, time(&trace));
  }
  std::printf(
      "fused f32 B*H=8 S=2048 D=64 fwd+bwd, 2 threads: trace off %.3f s, on %.3f s (%+.1f %%)\n",
      off, on, 100.0 * (on / off - 1.0));
  EXPECT_TRUE(trace.backward.valid);
}

}  // namespace
}  // namespace attnscope::test
