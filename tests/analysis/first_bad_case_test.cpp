// first_bad_case (core/analysis/first_bad_case.h): the origin of a forward failure is its first
// bad layer (later layers and, through dO, earlier gradients are its consequences); a
// gradient-only failure starts in the last layer whose dO was still finite; later steps are
// counted. In a multi-rank run the earliest origin over the ranks wins, and the ranks with
// errors in its step give its scope. first_nonfinite (and nonfinite_sites): the first NaN in
// execution order (forward layers ascending, then backward layers descending; steps, then
// ranks), at the earliest stage of that side. Micro-batches run one after the other, forward
// then backward, unless the recorder's event counter says otherwise.
#include <gtest/gtest.h>

#include "core/analysis/first_bad_case.h"

namespace attnscope {
namespace {

CaseOutcome verdict(int64_t step, int64_t layer, bool forward, bool backward, bool dout_nan) {
  CaseOutcome v;
  v.path = "/step_" + std::to_string(step) + "/layer_" + std::to_string(layer);
  v.step = step;
  v.layer = layer;
  v.forward_error = forward;
  v.backward_error = backward;
  v.dout_nonfinite = dout_nan;
  if (forward) v.kinds.push_back("nonfinite_input");
  if (backward) v.kinds.push_back("nonfinite_gradient");
  v.forward_lead = "forward lead";
  v.backward_lead = "backward lead";
  return v;
}

TEST(FirstBadCase, clean_dump_has_none) {
  EXPECT_FALSE(first_bad_case({verdict(0, 0, false, false, false)}));
  EXPECT_FALSE(first_bad_case({}));
}

TEST(FirstBadCase, forward_failure_in_layer_1_poisons_layer_2_forward_and_layer_0_gradients) {
  const std::vector<CaseOutcome> v = {verdict(0, 0, false, true, true),
                                      verdict(0, 1, true, true, true),
                                      verdict(0, 2, true, true, true)};
  const auto first = first_bad_case(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 1u);
  EXPECT_FALSE(first->from_backward);
  EXPECT_EQ(first->forward_into, std::vector<size_t>{2});
  EXPECT_EQ(first->backward_into, std::vector<size_t>{0});
  EXPECT_EQ(first->lead, "forward lead");
  EXPECT_NE(first->text.find("step 0, layer 1"), std::string::npos) << first->text;
}

TEST(FirstBadCase, gradient_only_failure_starts_in_the_last_layer_with_a_finite_do) {
  // Layer 2's backward made NaN (its dO was finite); layers 1 and 0 got it through dO.
  const std::vector<CaseOutcome> v = {
      verdict(0, 0, false, true, true), verdict(0, 1, false, true, true),
      verdict(0, 2, false, true, false), verdict(0, 3, false, false, false)};
  const auto first = first_bad_case(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 2u);
  EXPECT_TRUE(first->from_backward);
  EXPECT_EQ(first->backward_into, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(first->forward_into.empty());
  EXPECT_EQ(first->lead, "backward lead");
}

TEST(FirstBadCase, earliest_bad_step_wins_and_later_steps_are_listed) {
  const std::vector<CaseOutcome> v = {
      verdict(3, 0, false, false, false), verdict(4, 0, false, false, false),
      verdict(4, 1, true, false, false), verdict(5, 0, true, false, false),
      verdict(6, 1, true, false, false)};
  const auto first = first_bad_case(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 2u);
  EXPECT_EQ(first->later_steps, (std::vector<int64_t>{5, 6}));
  EXPECT_NE(first->text.find("2 later steps"), std::string::npos) << first->text;
}

CaseOutcome in_micro_batch(CaseOutcome v, int64_t micro_batch) {
  v.micro_batch = micro_batch;
  v.path = "/step_" + std::to_string(*v.step) + "/micro_0" + std::to_string(micro_batch) +
           "/layer_" + std::to_string(*v.layer);
  return v;
}

// Gradient accumulation (tied embeddings): micro-batch 0's backward made the NaN in layer 1
// (its dO finite) and passed it to layer 0 through dO; micro-batch 1's forward then read NaN
// weights. Micro-batch 0 ran first, forward and backward, so its layer 1 backward is the origin,
// named with its micro-batch; micro-batch 1 is not its propagation (no dO flows between them).
TEST(FirstBadCase, an_earlier_micro_batch_backward_comes_before_a_later_forward) {
  const std::vector<CaseOutcome> v = {in_micro_batch(verdict(0, 0, false, true, true), 0),
                                      in_micro_batch(verdict(0, 1, false, true, false), 0),
                                      in_micro_batch(verdict(0, 0, true, true, true), 1),
                                      in_micro_batch(verdict(0, 1, true, true, true), 1)};
  const auto first = first_bad_case(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 1u);
  EXPECT_TRUE(first->from_backward);
  EXPECT_EQ(first->backward_into, std::vector<size_t>{0});
  EXPECT_TRUE(first->forward_into.empty());
  EXPECT_EQ(first->text.rfind("step 0, micro-batch 0, layer 1 (/step_0/micro_00/layer_1)", 0), 0u)
      << first->text;
}

// The recorder's event counter is the order itself: in a pipeline schedule micro-batch 1's
// forward can run before micro-batch 0's backward, and then it is the origin.
TEST(FirstBadCase, the_recorded_event_order_wins_over_the_assumed_one) {
  std::vector<CaseOutcome> v = {in_micro_batch(verdict(0, 0, false, true, false), 0),
                                in_micro_batch(verdict(0, 0, true, false, false), 1)};
  ASSERT_EQ(first_bad_case(v)->index, 0u);  // assumed: micro-batch 0 entirely first
  v[0].forward_seq = 0;
  v[1].forward_seq = 1;
  v[0].backward_seq = 2;  // after micro-batch 1's forward
  v[1].backward_seq = 3;
  const auto first = first_bad_case(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 1u);
  EXPECT_FALSE(first->from_backward);
}

CaseOutcome on_rank(CaseOutcome v, int64_t rank) {
  v.rank = rank;
  v.path = "rank_" + std::to_string(rank) + ".h5::" + v.path;
  return v;
}

TEST(FirstBadCase, run_earliest_step_wins_over_lower_rank) {
  // Rank 0 fails at step 2, rank 1 at step 1 layer 1 (its own layers propagate within rank 1).
  const std::vector<CaseOutcome> v = {on_rank(verdict(1, 0, false, false, false), 0),
                                      on_rank(verdict(1, 1, false, false, false), 0),
                                      on_rank(verdict(2, 0, true, false, false), 0),
                                      on_rank(verdict(1, 0, false, true, true), 1),
                                      on_rank(verdict(1, 1, true, false, false), 1),
                                      on_rank(verdict(2, 0, true, false, false), 1)};
  auto lead_input = v;
  lead_input[4].input_nonfinite = true;
  lead_input[4].forward_head = 3;
  const auto first = first_bad_case(lead_input, 2);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 4u);
  EXPECT_EQ(first->head, 3);
  EXPECT_EQ(first->backward_into, (std::vector<size_t>{3}));  // rank 1's own layer 0 only
  EXPECT_EQ(first->ranks, (std::vector<int64_t>{1}));
  EXPECT_EQ(first->scope, "one_rank");
  EXPECT_EQ(first->later_steps, (std::vector<int64_t>{2}));
  EXPECT_EQ(first->text.rfind("step 1, layer 1, head 3, rank 1 (rank_1.h5::/step_1/layer_1)", 0),
            0u)
      << first->text;
  EXPECT_NE(first->text.find("rank 1 only (of 2 ranks): its inputs were already non-finite"),
            std::string::npos)
      << first->text;
  // Without non-finite inputs the fault is still local, but not the data's.
  const auto local = first_bad_case(v, 2);
  ASSERT_TRUE(local);
  EXPECT_NE(local->text.find("rank 1 only (of 2 ranks): a fault local to that rank"),
            std::string::npos)
      << local->text;
}

// Two ranks whose gradients went bad in the same step: the backward runs the last layer first,
// so rank 1's layer 3 comes before rank 0's layer 1 (both dO finite).
TEST(FirstBadCase, run_backward_origins_compare_in_backward_order) {
  const std::vector<CaseOutcome> v = {on_rank(verdict(1, 1, false, true, false), 0),
                                      on_rank(verdict(1, 3, false, false, false), 0),
                                      on_rank(verdict(1, 1, false, false, false), 1),
                                      on_rank(verdict(1, 3, false, true, false), 1)};
  const auto first = first_bad_case(v, 2);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 3u);
  EXPECT_TRUE(first->from_backward);
}

TEST(FirstBadCase, run_scope_counts_ranks_with_errors_in_the_step) {
  std::vector<CaseOutcome> v;
  for (int64_t rank = 0; rank < 4; ++rank) {
    v.push_back(on_rank(verdict(5, 0, rank == 0 || rank == 2, false, false), rank));
  }
  const auto some = first_bad_case(v, 4);
  ASSERT_TRUE(some);
  EXPECT_EQ(some->index, 0u);  // same place: the lowest rank
  EXPECT_EQ(some->scope, "some_ranks");
  EXPECT_EQ(some->ranks, (std::vector<int64_t>{0, 2}));
  EXPECT_NE(some->text.find("on ranks 0, 2 of 4 ranks"), std::string::npos) << some->text;
  for (CaseOutcome& c : v) c.forward_error = true;
  const auto all = first_bad_case(v, 4);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->scope, "all_ranks");
  EXPECT_NE(all->text.find("on all 4 ranks: something they share"), std::string::npos) << all->text;
  // A world larger than the ranks that recorded: two of eight is not all of them.
  EXPECT_EQ(first_bad_case(v, 8)->scope, "some_ranks");
}

TEST(FirstBadCase, single_dump_has_no_scope) {
  const auto first = first_bad_case({verdict(0, 0, true, false, false)});
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->scope.empty());
  EXPECT_TRUE(first->ranks.empty());
  EXPECT_EQ(first->text.find("rank"), std::string::npos) << first->text;
}

// A non-finite site of `stage` (its view "S", "O", "dQ", ...).
NonfiniteSite site(NonfiniteStage stage, const std::string& view, int64_t head = 0) {
  NonfiniteSite s;
  s.stage = stage;
  s.view = view;
  s.kind = "nonfinite_output";
  s.head = head;
  return s;
}

CaseOutcome with_sites(int64_t step, int64_t layer, std::vector<NonfiniteSite> sites,
                       std::optional<int64_t> rank = std::nullopt) {
  CaseOutcome v = verdict(step, layer, false, false, false);
  v.nonfinite = std::move(sites);
  v.rank = rank;
  return v;
}

TEST(FirstNonfinite, a_forward_nan_comes_before_every_backward_of_its_step) {
  // Layer 0 only received NaN gradients; layer 2's forward made it: layer 2 is the origin,
  // though layer 0 comes first in the file and has an error first.
  const std::vector<CaseOutcome> v = {
      with_sites(0, 0,
                 {site(NonfiniteStage::upstream, "dO"), site(NonfiniteStage::gradients, "dQ")}),
      with_sites(0, 1, {site(NonfiniteStage::upstream, "dO")}),
      with_sites(0, 2,
                 {site(NonfiniteStage::scores, "S", 3), site(NonfiniteStage::outputs, "O"),
                  site(NonfiniteStage::upstream, "dO")}),
      with_sites(0, 3, {site(NonfiniteStage::inputs, "q")})};
  const auto first = first_nonfinite(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 2u);
  EXPECT_EQ(first->site.view, "S");
  EXPECT_EQ(first->site.head, 3);
  EXPECT_NE(first->text.find("step 0, layer 2, forward (/step_0/layer_2): S in batch 0, head 3"),
            std::string::npos)
      << first->text;
  // The order: forward of 2, 3, then backward of 2, 1, 0.
  const std::vector<NonfiniteEvent> events = nonfinite_events(v);
  std::vector<std::pair<size_t, bool>> order;
  for (const NonfiniteEvent& e : events) order.emplace_back(e.index, e.backward);
  EXPECT_EQ(order, (std::vector<std::pair<size_t, bool>>{
                       {2, false}, {3, false}, {2, true}, {1, true}, {0, true}}));
}

TEST(FirstNonfinite, micro_batches_run_one_after_the_other_or_as_recorded) {
  std::vector<CaseOutcome> v = {with_sites(0, 1, {site(NonfiniteStage::gradients, "dQ")}),
                                with_sites(0, 0, {site(NonfiniteStage::scores, "S")})};
  v[0].micro_batch = 0;
  v[1].micro_batch = 1;
  auto first = first_nonfinite(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 0u);  // micro-batch 0's backward before micro-batch 1's forward
  EXPECT_NE(first->text.find("step 0, micro-batch 0, layer 1, backward"), std::string::npos)
      << first->text;
  v[0].forward_seq = 0;
  v[1].forward_seq = 1;
  v[0].backward_seq = 3;
  v[1].backward_seq = 2;
  first = first_nonfinite(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 1u);  // as recorded: micro-batch 1's forward ran before
}

TEST(FirstNonfinite, a_backward_born_nan_starts_in_the_last_layer_of_the_step) {
  const std::vector<CaseOutcome> v = {with_sites(4, 0, {site(NonfiniteStage::gradients, "dK")}),
                                      with_sites(4, 1, {site(NonfiniteStage::gradients, "dV")})};
  const auto first = first_nonfinite(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 1u);  // the backward runs layer 1 before layer 0
  EXPECT_NE(first->text.find("layer 1, backward"), std::string::npos) << first->text;
}

TEST(FirstNonfinite, earlier_step_then_lower_rank_wins_and_loose_cases_come_last) {
  CaseOutcome loose;
  loose.path = "/loose";
  loose.nonfinite = {site(NonfiniteStage::scores, "S")};
  const std::vector<CaseOutcome> v = {loose,
                                      with_sites(1, 0, {site(NonfiniteStage::outputs, "O")}, 0),
                                      with_sites(0, 3, {site(NonfiniteStage::gradients, "dQ")}, 0),
                                      with_sites(0, 3, {site(NonfiniteStage::gradients, "dQ")}, 1)};
  const auto first = first_nonfinite(v);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->index, 2u);  // step 0 (rank 0 listed before rank 1), not step 1 or /loose
  EXPECT_EQ(nonfinite_events(v).back().index, 0u);
  EXPECT_FALSE(first_nonfinite({verdict(0, 0, true, false, false)}));  // an error, no NaN
}

TEST(NonfiniteSites, findings_in_stage_order_with_the_view_that_shows_them) {
  Finding grad;
  grad.kind = FindingKind::nonfinite_gradient;
  grad.tensor = "dQ";
  Finding masked;
  masked.kind = FindingKind::fully_masked_row;
  masked.tensor = "O";
  masked.heads = {2, 3};
  Finding input;
  input.kind = FindingKind::nonfinite_input;
  input.tensor = "k";
  Finding warning;
  warning.kind = FindingKind::precision_loss;
  warning.severity = Severity::warning;
  Finding dout = input;
  dout.tensor = "dO";
  const std::vector<NonfiniteSite> sites = nonfinite_sites({grad, masked, warning, dout, input});
  ASSERT_EQ(sites.size(), 4u);
  EXPECT_EQ(sites[0].view, "k");
  EXPECT_EQ(sites[1].view, "P");  // a fully masked row: NaN first in P (exp(-inf - -inf))
  EXPECT_EQ(sites[1].head, 2);    // the first of its heads
  EXPECT_EQ(sites[2].view, "dO");
  EXPECT_EQ(sites[3].view, "dQ");
  EXPECT_TRUE(is_backward_stage(sites[2].stage));
}

}  // namespace
}  // namespace attnscope
