// Replay as recorded (core/replay.h, analyze_case): the run record decides mode, fill, P
// source and dropout; defaults judge the recording as it ran, what-ifs never make the
// recorded-output check blame the recording; dropout without a keep-mask and a score_mod that
// cannot be replayed are named, not reported as a mismatch.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis_test_util.h"
#include "core/analysis/reference64.h"
#include "core/replay.h"

namespace attnscope::testing {
namespace {

RunRecord sdpa(const std::string& backend, const std::string& version = "2.11.0+cu130") {
  RunRecord r;
  r.backend = backend;
  r.torch_version = version;
  r.device = "cpu";
  return r;
}

TEST(Replay, flash_backend_is_fused_from_lse_with_safe_rows_since_torch_2_5) {
  CaseConfig c;
  c.dtype = "float16";
  c.run = sdpa("sdpa_flash");
  const Replay r = replay_of(c, false);
  EXPECT_TRUE(r.backend_known);
  EXPECT_EQ(r.modes, std::vector<Mode>{Mode::fused});
  EXPECT_FALSE(r.upcast);
  EXPECT_EQ(r.precision, Precision::f16);
  EXPECT_EQ(r.mask_fill, MaskFill::safe);
  EXPECT_EQ(r.backward_p, BackwardP::from_lse);
  EXPECT_NE(r.text.find("sdpa_flash"), std::string::npos) << r.text;
  c.run.torch_version = "2.4.1";
  EXPECT_EQ(replay_of(c, false).mask_fill, MaskFill::neg_inf);
}

// PyTorch's CPU flash backward adds each block's dQ / dK / dV to bf16 / fp16 accumulators;
// every other kernel (a GPU, fp32, another backend) rounds its gradients once.
TEST(Replay, cpu_flash_low_precision_gradients_are_rounded_once_per_block) {
  CaseConfig c;
  c.dtype = "bfloat16";
  c.run = sdpa("sdpa_flash");
  const Replay r = replay_of(c, false);
  EXPECT_TRUE(r.gradients_accumulate_stored);
  EXPECT_EQ(stored_roundings(r, "dk", 4096, 4096, 1), 16);  // 256 query rows per block
  EXPECT_EQ(stored_roundings(r, "dv", 700, 700, 4), 44);    // 64 rows, 4 heads per kv head
  EXPECT_EQ(stored_roundings(r, "dv", 100, 100, 1), 4);     // 32 rows
  EXPECT_EQ(stored_roundings(r, "dq", 4096, 4096, 4), 8);   // 512 keys per block
  EXPECT_EQ(stored_roundings(r, "o", 4096, 4096, 4), 1);
  c.dtype = "float32";
  EXPECT_EQ(stored_roundings(replay_of(c, false), "dk", 4096, 4096, 4), 1);
  c.dtype = "bfloat16";
  c.run.device = "cuda:0";
  EXPECT_EQ(stored_roundings(replay_of(c, false), "dk", 4096, 4096, 4), 1);
  c.run = sdpa("sdpa_math");
  EXPECT_EQ(stored_roundings(replay_of(c, false), "dk", 4096, 4096, 4), 1);
}

TEST(Replay, sdpa_math_upcasts_low_precision_on_cpu_and_runs_eager_on_a_gpu) {
  CaseConfig c;
  c.dtype = "bfloat16";
  c.run = sdpa("sdpa_math");
  Replay r = replay_of(c, false);
  EXPECT_EQ(r.modes, std::vector<Mode>{Mode::fused});
  EXPECT_TRUE(r.upcast);
  EXPECT_EQ(r.backward_p, BackwardP::saved);
  c.dtype = "float32";
  EXPECT_FALSE(replay_of(c, false).upcast);
  c.dtype = "bfloat16";
  c.run.device = "cuda:0";
  r = replay_of(c, false);
  EXPECT_EQ(r.modes, std::vector<Mode>{Mode::unfused});
  EXPECT_FALSE(r.upcast);
}

TEST(Replay, transformers_eager_is_the_unfused_kernel_in_the_recorded_dtype_on_any_device) {
  CaseConfig c;
  c.dtype = "float16";
  c.run = sdpa("eager");
  for (const char* device : {"cpu", "cuda:0"}) {
    c.run.device = device;
    const Replay r = replay_of(c, false);
    EXPECT_TRUE(r.backend_known);
    EXPECT_EQ(r.modes, std::vector<Mode>{Mode::unfused}) << device;
    EXPECT_FALSE(r.upcast);
    EXPECT_EQ(r.precision, Precision::f16);
    EXPECT_EQ(r.mask_fill, MaskFill::neg_inf);  // eager softmax of an all -inf row is NaN
  }
}

TEST(Replay, unknown_backend_keeps_both_modes_neg_inf_rows_and_autocast_sets_precision) {
  CaseConfig c;
  c.dtype = "float32";
  Replay r = replay_of(c, false);
  EXPECT_FALSE(r.backend_known);
  EXPECT_EQ(r.modes, (std::vector<Mode>{Mode::fused, Mode::unfused}));
  EXPECT_EQ(r.mask_fill, MaskFill::neg_inf);
  EXPECT_EQ(r.precision, Precision::f32);
  c.run.autocast_dtype = "bfloat16";
  EXPECT_EQ(replay_of(c, false).precision, Precision::bf16);
}

TEST(Replay, dropout_with_and_without_keep_mask_and_inverted_polarity) {
  CaseConfig c;
  EXPECT_EQ(replay_of(c, true).dropout, DropoutReplay::none);  // p = 0: the mask means nothing
  c.run.dropout_p = 0.1;
  EXPECT_EQ(replay_of(c, true).dropout, DropoutReplay::mask);
  EXPECT_EQ(replay_of(c, false).dropout, DropoutReplay::unavailable);
  c.run.mask_convention = "masked_out";
  EXPECT_TRUE(replay_of(c, false).invert_mask);
  EXPECT_EQ(framework_version("2.11.0+cu130"), std::make_pair(2, 11));
  EXPECT_EQ(framework_version("nightly"), std::make_pair(0, 0));
}

// The case's fp64 outputs under its own replay, stored as the recording (fp32).
void record_outputs(CaseData& c) {
  Result<CaseInputs> in = make_case_inputs(c, RunChoice{});
  ASSERT_TRUE(in.ok());
  const Reference64 ref = compute_reference64(*in, true, 1);
  const CaseDims& d = c.info.dims;
  put(c, "o", DType::f32, {d.batch, d.heads, d.seqlen_q, d.head_dim_v}, ref.o);
  put(c, "dq", DType::f32, {d.batch, d.heads, d.seqlen_q, d.head_dim}, ref.dq);
  put(c, "dk", DType::f32, {d.batch, d.kv_heads, d.seqlen_k, d.head_dim}, ref.dk);
  put(c, "dv", DType::f32, {d.batch, d.kv_heads, d.seqlen_k, d.head_dim_v}, ref.dv);
}

// Batch 0 of a 2-batch fp32 case: query rows 3 and 9 attend to no key (bool mask).
CaseData padded_flash_case() {
  CaseSpec s = spec(2, 2, "float32");
  s.batch = 2;
  CaseData c = make_case(s);
  c.info.config.run = sdpa("sdpa_flash");
  std::vector<double> mask(static_cast<size_t>(2 * 16 * 16), 1.0);
  for (int64_t j = 0; j < 16; ++j) mask[3 * 16 + j] = mask[9 * 16 + j] = 0;
  put(c, "mask", DType::boolean, {2, 1, 16, 16}, mask);
  return c;
}

TEST(ReplayAnalysis, zeroed_padding_rows_of_a_recorded_sdpa_run_are_info_not_errors) {
  CaseData c = padded_flash_case();
  record_outputs(c);
  const CaseAnalysis a = analyze(c);
  EXPECT_FALSE(a.what_if);
  EXPECT_EQ(a.judged_under.rfind("as recorded (sdpa_flash", 0), 0u) << a.judged_under;
  EXPECT_FALSE(has_error(a.findings)) << summary(a);
  const auto masked = of_kind(a, FindingKind::fully_masked_row);
  ASSERT_EQ(masked.size(), 1u) << summary(a);
  EXPECT_EQ(masked[0]->severity, Severity::info);
  EXPECT_NE(masked[0]->message.find("intentional padding"), std::string::npos);
  for (const RecordedComparison& r : a.recorded) EXPECT_TRUE(r.within_rule) << r.tensor;
}

TEST(ReplayAnalysis, what_if_fill_shows_nan_rows_but_never_blames_the_recording) {
  CaseData c = padded_flash_case();
  record_outputs(c);
  AnalysisSettings s;
  s.run.mask_fill = MaskFill::neg_inf;
  const CaseAnalysis a = analyze(c, s);
  EXPECT_TRUE(a.what_if);
  EXPECT_EQ(a.judged_under.rfind("what-if: mask fill -inf", 0), 0u) << a.judged_under;
  const auto masked = of_kind(a, FindingKind::fully_masked_row);
  ASSERT_FALSE(masked.empty());
  EXPECT_EQ(masked[0]->severity, Severity::error);
  EXPECT_TRUE(masked[0]->what_if);
  EXPECT_FALSE(has_kind(a, FindingKind::recorded_mismatch)) << summary(a);
  for (const RecordedComparison& r : a.recorded) EXPECT_TRUE(r.within_rule) << r.tensor;
}

TEST(ReplayAnalysis, a_recording_that_breaks_the_replay_is_one_mismatch_per_tensor) {
  CaseData c = padded_flash_case();
  record_outputs(c);
  std::vector<double> dq = values(c, "dq");
  for (size_t e = 0; e < dq.size(); e += 2) dq[e] *= 3;  // every head of both batches
  const CaseDims& d = c.info.dims;
  put(c, "dq", DType::f32, {d.batch, d.heads, d.seqlen_q, d.head_dim}, dq);
  std::vector<double> o = values(c, "o");
  o[5] = NAN;  // batch 0, head 0, row 0
  put(c, "o", DType::f32, {d.batch, d.heads, d.seqlen_q, d.head_dim_v}, o);
  const CaseAnalysis a = analyze(c);
  const auto mismatch = of_kind(a, FindingKind::recorded_mismatch);
  ASSERT_EQ(mismatch.size(), 2u) << summary(a);  // o and dq, each once
  for (const Finding* f : mismatch) {
    EXPECT_EQ(f->severity, Severity::error);
    EXPECT_FALSE(f->what_if);
  }
  const Finding* on_o = mismatch[0]->tensor == "o" ? mismatch[0] : mismatch[1];
  EXPECT_NE(on_o->message.find("1 elements are NaN/Inf in the recording where the fp64 replay "
                               "is finite"),
            std::string::npos)
      << on_o->message;
  EXPECT_EQ(on_o->message.find("max error"), std::string::npos) << on_o->message;
  const Finding* on_dq = mismatch[0]->tensor == "dq" ? mismatch[0] : mismatch[1];
  EXPECT_EQ(on_dq->count, 4);  // 2 batches x 2 heads
  EXPECT_NE(on_dq->message.find("in 4 heads"), std::string::npos) << on_dq->message;
}

TEST(ReplayAnalysis, dropout_is_replayed_from_the_keep_mask) {
  CaseData c = make_case(spec(2, 1, "float32"));
  c.info.config.run = sdpa("sdpa_math");
  c.info.config.run.dropout_p = 0.25;
  std::vector<double> keep(static_cast<size_t>(2 * 16 * 16));
  for (size_t e = 0; e < keep.size(); ++e) keep[e] = (e * 7919 % 4) != 0;  // 25 % dropped
  put(c, "dropout_mask", DType::boolean, {1, 2, 16, 16}, keep);
  record_outputs(c);
  const CaseAnalysis a = analyze(c);
  EXPECT_EQ(a.replay.dropout, DropoutReplay::mask);
  EXPECT_FALSE(has_error(a.findings)) << summary(a);
  ASSERT_EQ(a.recorded.size(), 4u);
  for (const RecordedComparison& r : a.recorded) EXPECT_TRUE(r.within_rule) << r.tensor;
  // The same recording judged without its keep-mask would be wrong everywhere: the check is
  // left out and named instead.
  c.tensors.erase("dropout_mask");
  const CaseAnalysis blind = analyze(c);
  EXPECT_EQ(blind.replay.dropout, DropoutReplay::unavailable);
  EXPECT_FALSE(has_kind(blind, FindingKind::recorded_mismatch)) << summary(blind);
  ASSERT_EQ(of_kind(blind, FindingKind::replay_inexact).size(), 1u) << summary(blind);
  EXPECT_EQ(of_kind(blind, FindingKind::replay_inexact)[0]->severity, Severity::info);
  EXPECT_TRUE(blind.recorded.empty());
  // From another writer the remedy is to record with attnscope_record; when attnscope_record
  // wrote it and says the call ran in a compiled graph, to record it outside torch.compile.
  EXPECT_NE(of_kind(blind, FindingKind::replay_inexact)[0]->remedy.find("with attnscope_record"),
            std::string::npos);
  c.info.config.run.dropout_replay = "unavailable";
  c.info.config.run.dropout_note =
      "the call ran in a torch.compile graph, which draws its dropout mask its own way";
  const std::string compiled = of_kind(analyze(c), FindingKind::replay_inexact)[0]->remedy;
  EXPECT_EQ(compiled.rfind("record the step outside torch.compile", 0), 0u) << compiled;
  EXPECT_EQ(compiled.find("with attnscope_record"), std::string::npos) << compiled;
}

// The missing 1/sqrt(d) bug: o and the gradients were computed at scale 1 while the dump says
// 1/sqrt(8). As recorded they mismatch (a warning names scale 1); the what-if scale 1
// reproduces them (a hypothesis test), scale 0.5 does not. Without a scale attribute, scale 1
// is inferred and the case judged under it.
TEST(ReplayAnalysis, what_if_says_which_recorded_outputs_it_reproduces) {
  CaseData c = make_case(spec(2, 1, "float32"));
  c.info.config.run = sdpa("sdpa_math");
  c.info.config.scale = 1.0;
  record_outputs(c);
  c.info.config.scale.reset();
  const CaseAnalysis inferred = analyze(c);
  EXPECT_FALSE(has_kind(inferred, FindingKind::recorded_mismatch)) << summary(inferred);
  EXPECT_EQ(inferred.replay.inferred.scale, std::optional<double>(1.0));
  EXPECT_EQ(inferred.params.scale, 1.0);
  c.info.config.scale = 1 / std::sqrt(8.0);  // the dump says the default
  const CaseAnalysis recorded = analyze(c);
  EXPECT_TRUE(has_kind(recorded, FindingKind::recorded_mismatch)) << summary(recorded);
  EXPECT_FALSE(recorded.replay.inferred.any());
  ASSERT_EQ(of_kind(recorded, FindingKind::recorded_convention).size(), 1u) << summary(recorded);
  EXPECT_NE(of_kind(recorded, FindingKind::recorded_convention)[0]->message.find(
                "matches the fp64 replay at softmax scale 1, not at the recorded scale 0.354"),
            std::string::npos)
      << summary(recorded);
  EXPECT_FALSE(recorded.what_if_explains.has_value());
  EXPECT_EQ(what_if_explains_text(recorded), "");
  AnalysisSettings s;
  s.run.scale = 1.0;
  const CaseAnalysis hypothesis = analyze(c, s);
  ASSERT_TRUE(hypothesis.what_if_explains.has_value());
  EXPECT_EQ(*hypothesis.what_if_explains, (std::vector<std::string>{"o", "dq", "dk", "dv"}));
  EXPECT_EQ(what_if_explains_text(hypothesis), "the what-if reproduces the recorded o, dq, dk, dv");
  // Still judged as recorded: the mismatch stays, the what-if explains it.
  EXPECT_TRUE(has_kind(hypothesis, FindingKind::recorded_mismatch)) << summary(hypothesis);
  s.run.scale = 0.5;
  const CaseAnalysis wrong = analyze(c, s);
  ASSERT_TRUE(wrong.what_if_explains.has_value());
  EXPECT_TRUE(wrong.what_if_explains->empty());
  EXPECT_EQ(what_if_explains_text(wrong), "the what-if reproduces none of the recorded outputs");
}

// A dO that is NaN everywhere makes every recorded and replayed gradient NaN: the same pattern,
// within the rule, yet no value was compared, so the what-if reproduces only o.
TEST(ReplayAnalysis, gradients_nan_on_both_sides_are_not_reproduced_by_a_what_if) {
  CaseData c = make_case(spec(2, 1, "float32"));
  c.info.config.run = sdpa("sdpa_math");
  std::vector<double> dout = values(c, "do");
  for (double& x : dout) x = std::nan("");
  put(c, "do", c.tensors.at("do").dtype, c.tensors.at("do").shape, dout);
  record_outputs(c);
  AnalysisSettings s;
  s.run.precision = Precision::bf16;
  const CaseAnalysis a = analyze(c, s);
  ASSERT_TRUE(a.what_if_explains.has_value());
  EXPECT_EQ(*a.what_if_explains, std::vector<std::string>{"o"});
  for (const RecordedComparison& r : a.recorded) {
    EXPECT_EQ(r.finite_pairs == 0, r.tensor[0] == 'd') << r.tensor;
  }
}

TEST(ReplayAnalysis, score_mod_that_cannot_be_replayed_is_named_not_blamed) {
  CaseData c = make_case(spec(2, 1, "float32"));
  c.info.config.run = sdpa("flex");
  record_outputs(c);
  // What a score_mod the kernels cannot express (score * 2) would have recorded: every
  // recorded output differs from the replay without it.
  for (const char* name : {"o", "dq", "dk", "dv"}) {
    std::vector<double> x = values(c, name);
    for (double& e : x) e = 2 * e + 1;
    put(c, name, c.tensors.at(name).dtype, c.tensors.at(name).shape, x);
  }
  ASSERT_TRUE(has_kind(analyze(c), FindingKind::recorded_mismatch));
  c.info.config.run.score_mod = "def double(score, b, h, q, kv):\n    return score * 2\n";
  c.info.config.run.score_mod_replay = "unavailable";
  c.info.config.run.score_mod_note = "not a softcap or an additive bias";
  const CaseAnalysis a = analyze(c);
  EXPECT_TRUE(a.replay.score_mod_unavailable);
  EXPECT_FALSE(a.replay.exact());
  EXPECT_NE(a.replay.text.find("score_mod not replayed"), std::string::npos) << a.replay.text;
  EXPECT_FALSE(has_kind(a, FindingKind::recorded_mismatch)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::exp_overflow)) << summary(a);
  EXPECT_TRUE(a.recorded.empty());
  const auto inexact = of_kind(a, FindingKind::replay_inexact);
  ASSERT_EQ(inexact.size(), 1u) << summary(a);
  EXPECT_EQ(inexact[0]->severity, Severity::info);
  EXPECT_NE(inexact[0]->message.find("score_mod cannot be replayed (not a softcap or an "
                                     "additive bias)"),
            std::string::npos)
      << inexact[0]->message;
}

TEST(ReplayAnalysis, masked_nan_leak_is_found_from_the_forward_when_do_is_nan_too) {
  CaseData c = padded_flash_case();
  std::vector<double> v = values(c, "v"), dout = values(c, "do");
  // Key 15 is masked for every query of batch 0 and holds NaN; dO is NaN everywhere.
  std::vector<double> mask = values(c, "mask");
  for (int64_t i = 0; i < 16; ++i) mask[static_cast<size_t>(i * 16 + 15)] = 0;
  put(c, "mask", DType::boolean, {2, 1, 16, 16}, mask);
  for (int64_t h = 0; h < 2; ++h) v[static_cast<size_t>((h * 16 + 15) * 8)] = NAN;
  for (double& x : dout) x = NAN;
  put(c, "v", DType::f32, {2, 2, 16, 8}, v);
  put(c, "do", DType::f32, {2, 2, 16, 8}, dout);
  const CaseAnalysis a = analyze(c);
  const auto leak = of_kind(a, FindingKind::masked_nan_leak);
  ASSERT_EQ(leak.size(), 1u) << summary(a);
  EXPECT_EQ(leak[0]->batch, 0);
  EXPECT_EQ(leak[0]->tensor, "v");
  // Both heads, all 16 rows: the fully masked rows 3 and 9 too (P = 0, 0 x NaN in P V).
  EXPECT_EQ(leak[0]->count, 2 * 16);
}

TEST(ReplayAnalysis, score_overflow_ignores_inf_inputs_and_mask_sentinels) {
  CaseData c = make_case(spec(2, 2, "float16"));
  c.info.config.run = sdpa("sdpa_flash");
  std::vector<double> q = values(c, "q");
  q[0] = INFINITY;  // batch 0, head 0, row 0
  put(c, "q", DType::f16, {1, 2, 16, 8}, q);
  std::vector<double> bias(static_cast<size_t>(16 * 16), 0.0);
  for (int64_t i = 0; i < 16; ++i) bias[static_cast<size_t>(i * 16 + 15)] = -65504;  // finfo.min
  put(c, "bias", DType::f16, {1, 1, 16, 16}, bias);
  const CaseAnalysis a = analyze(c);
  EXPECT_TRUE(has_kind(a, FindingKind::nonfinite_input)) << summary(a);
  EXPECT_FALSE(has_kind(a, FindingKind::score_overflow)) << summary(a);
}

TEST(ReplayAnalysis, findings_of_one_kind_and_tensor_are_grouped_with_locations) {
  CaseSpec s = spec(4, 4, "float32");
  s.batch = 2;
  CaseData c = make_case(s);
  std::vector<double> k = values(c, "k");
  k[0] = NAN;                                          // batch 0, kv head 0, key 0
  k[static_cast<size_t>((1 * 4 + 3) * 16 * 8)] = NAN;  // batch 1, kv head 3, key 0
  put(c, "k", DType::f32, {2, 4, 16, 8}, k);
  const CaseAnalysis a = analyze(c);
  std::vector<const Finding*> k_input;
  for (const Finding* f : of_kind(a, FindingKind::nonfinite_input)) {
    if (f->tensor == "k") k_input.push_back(f);
  }
  ASSERT_EQ(k_input.size(), 1u) << summary(a);
  ASSERT_EQ(k_input[0]->locations.size(), 2u);
  EXPECT_EQ(k_input[0]->locations[0].batch, 0);
  EXPECT_EQ(k_input[0]->locations[1].batch, 1);
  EXPECT_EQ(k_input[0]->locations[1].head, 3);
  EXPECT_EQ(k_input[0]->count, 2);
  EXPECT_EQ(k_input[0]->batch, -1);  // several batches
  EXPECT_NE(k_input[0]->message.find("[2 places"), std::string::npos) << k_input[0]->message;
}

}  // namespace
}  // namespace attnscope::testing
