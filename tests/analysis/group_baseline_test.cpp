// Pins GroupBaseline: the unfused kernel run a round of (batch, kv group)s at a time (one group,
// or three across a batch boundary) gives, group by group, the bits of the whole unfused run
// (GQA, batch 2, a per-batch mask, a per-head bias, no dO; o and lse also from the forward
// alone), and gathers lse and a broadcast batch's summed gradients as the whole run's readers
// do (a feed running it: RecordedFeed's test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "analysis_test_util.h"
#include "core/analysis/group_baseline.h"
#include "core/case_inputs.h"

namespace attnscope::testing {
namespace {

// Bit for bit, any NaN matching any NaN.
bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

// Elements [first, first + n) of `reader` and of `whole` are the same bits; counts mismatches.
int64_t mismatches(const ValueReader& reader, const ValueReader& whole, int64_t first, int64_t n) {
  std::vector<double> a(static_cast<size_t>(n)), b(a.size());
  reader(first, n, a.data());
  whole(first, n, b.data());
  int64_t bad = 0;
  for (size_t e = 0; e < a.size(); ++e) bad += !same_bits(a[e], b[e]);
  return bad;
}

// Runs the groups of `c` in rounds of `round` groups and compares every output with the whole
// unfused run under the same parameters (the replay's, at the recorded precision).
void expect_groups_are_the_whole_run(const CaseData& c, int64_t round) {
  Result<CaseInputs> in = make_case_inputs(c, RunChoice{}, InputValues::none);
  ASSERT_TRUE(in.ok());
  const AttnParams& p = in->params;
  const KernelInputs kin(c);
  CpuAttnOptions options;
  options.mode = Mode::unfused;
  options.threads = 2;
  const CpuAttnResult whole = cpu_attention(p, options, kin.view());
  GroupBaseline groups(c, p, /*gradients=*/true, /*threads=*/2);
  GroupBaseline forward(c, p, /*gradients=*/false, /*threads=*/2);  // o and lse alone
  const int64_t G = p.group_size(), Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  const int64_t B = p.batch, all = B * p.kv_heads;
  const CaseDims& dims = c.info.dims;
  for (int64_t first = 0; first < all; first += round) {
    const int64_t last = std::min(all, first + round);
    groups.run(first, last);
    forward.run(first, last);
    for (int64_t bkv = first; bkv < last; ++bkv) {
      SCOPED_TRACE("group " + std::to_string(bkv) + " of round " + std::to_string(first));
      for (const GroupBaseline* x : {&groups, &forward}) {
        EXPECT_EQ(mismatches(x->reader("o"), values_of(whole.o), bkv * G * Sq * D, G * Sq * D), 0);
      }
      if (!dims.batch_summed("dq")) {
        EXPECT_EQ(
            mismatches(groups.reader("dq"), values_of(whole.dq), bkv * G * Sq * D, G * Sq * D), 0);
      }
      for (const char* name : {"dk", "dv"}) {
        if (dims.batch_summed(name)) continue;
        const std::vector<float>& x = std::string(name) == "dk" ? whole.dk : whole.dv;
        EXPECT_EQ(mismatches(groups.reader(name), values_of(x), bkv * Sk * D, Sk * D), 0) << name;
      }
    }
    if (first > 0) {  // an earlier round's outputs are gone
      std::vector<double> head(static_cast<size_t>(Sq * D));
      EXPECT_THROW(groups.reader("o")(0, Sq * D, head.data()), std::out_of_range);
    }
  }
  const auto n = [](const std::vector<float>& x) { return static_cast<int64_t>(x.size()); };
  for (const GroupBaseline* x : {&groups, &forward}) {
    EXPECT_EQ(mismatches(x->reader("lse"), values_of(whole.lse), 0, n(whole.lse)), 0);
  }
  for (const char* name : {"dk", "dv"}) {
    if (!dims.batch_summed(name)) continue;
    const std::vector<float>& x = std::string(name) == "dk" ? whole.dk : whole.dv;
    EXPECT_EQ(mismatches(groups.reader(name), batch_sum_of(x, B), 0, n(x) / B), 0) << name;
  }
}

TEST(GroupBaseline, every_group_is_the_whole_unfused_run_bit_for_bit) {
  CaseSpec s = spec(4, 2);
  s.batch = 2;
  {
    SCOPED_TRACE("gqa, batch 2, causal");
    CaseData c = make_case(s);
    c.info.config.causal = true;
    for (const int64_t round : {1, 3}) expect_groups_are_the_whole_run(c, round);
  }
  {
    SCOPED_TRACE("per-batch key padding mask, per-head bias");
    CaseData c = make_case(s);
    std::vector<double> mask(2 * 16), bias(4 * 16 * 16);
    for (size_t e = 0; e < mask.size(); ++e) mask[e] = (e % 16) < (e < 16 ? 16u : 11u);
    for (size_t e = 0; e < bias.size(); ++e) bias[e] = 0.25 * static_cast<double>(e % 7) - 0.5;
    put(c, "mask", DType::boolean, {2, 1, 1, 16}, mask);
    put(c, "bias", DType::f32, {1, 4, 16, 16}, bias);
    for (const int64_t round : {1, 3}) expect_groups_are_the_whole_run(c, round);
  }
  {
    SCOPED_TRACE("bf16, no dO, k and v broadcast over the batch");
    CaseSpec t = s;
    t.dtype = "bfloat16";
    t.dout = false;
    CaseData c = make_case(t);
    c.info.dims.kv_broadcast = true;
    for (const int64_t round : {1, 3}) expect_groups_are_the_whole_run(c, round);
  }
}

}  // namespace
}  // namespace attnscope::testing
