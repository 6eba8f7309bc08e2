// One clip definition headless (issue 15): a head's gradients clipped by compute_head carry the
// coefficient of the whole case's clip_grad_norm_ (the CLI's clip_case_gradients over the
// case's own gradients), or of its kv-head group, and equal the unclipped ones times it, rounded
// to the precision; a max_norm change reuses the case's gradients.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/case_inputs.h"
#include "core/view/head_compute.h"
#include "kernels/cpu/fused_attention.h"
#include "kernels/precision.h"
#include "tests/view/smooth_case.h"

namespace attnscope::test {
namespace {

// clip_case_gradients over the case's gradients from one whole-case run of the own CPU kernel.
std::vector<ClipResult> caseClips(const CaseData& c, ClipScope scope, double max_norm) {
  Result<CaseInputs> in = make_case_inputs(c, {});
  EXPECT_TRUE(in.ok());
  const CpuAttnResult r = cpu_attention(in->params, CpuAttnOptions{}, KernelInputs(c).view());
  const AttnParams& p = in->params;
  CaseGradients g{p.batch,    p.heads,      p.kv_heads, p.seqlen_q, p.seqlen_k,
                  p.head_dim, p.head_dim_v, r.dq,       r.dk,       r.dv};
  return clip_case_gradients(g, scope, max_norm, Precision::f32);
}

bool hasPhase(const HeadResult& r, const char* name) {
  return std::any_of(r.phases.begin(), r.phases.end(),
                     [name](const HeadPhase& p) { return std::string(p.name) == name; });
}

TEST(CaseClip, a_head_is_clipped_with_the_whole_cases_coefficient) {
  const CaseData c = smoothCase(3);
  HeadRequest plain;
  plain.head = 1;
  const Result<HeadResult> unclipped = compute_head(c, plain);
  ASSERT_TRUE(unclipped.ok());
  HeadRequest req = plain;
  req.run.clip_norm = 0.5;
  HeadCache cache;
  const Result<HeadResult> r = compute_head(c, req, &cache);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<ClipResult> want = caseClips(c, ClipScope::whole_case, 0.5);
  ASSERT_EQ(want.size(), size_t{1});
  ASSERT_TRUE(r->clip.has_value());
  EXPECT_EQ(r->clip->total_norm, want.front().total_norm);
  EXPECT_EQ(r->clip->coef, want.front().coef);
  EXPECT_LT(r->clip->coef, 1.0);
  EXPECT_EQ(r->clip->names, (std::vector<std::string>{"dQ", "dK", "dV"}));
  const float factor = static_cast<float>(r->clip->coef);
  for (size_t i = 0; i < r->dq.raw.size(); ++i) {
    ASSERT_EQ(r->dq.raw[i], unclipped->dq.raw[i] * factor) << i;
  }
  for (size_t i = 0; i < r->dv.raw.size(); ++i) {
    ASSERT_EQ(r->dv.raw[i], unclipped->dv.raw[i] * factor) << i;
  }
  // Another max_norm: the case's gradients are not computed again.
  req.run.clip_norm = 0.25;
  const Result<HeadResult> again = compute_head(c, req, &cache);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(hasPhase(*again, "case gradients"));
  EXPECT_TRUE(hasPhase(*r, "case gradients"));
  EXPECT_EQ(again->clip->coef, caseClips(c, ClipScope::whole_case, 0.25).front().coef);
  // Another head at the same clip: neither the gradients nor the clip is computed again.
  req.head = 2;
  const Result<HeadResult> other = compute_head(c, req, &cache);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(hasPhase(*again, "case clip"));
  EXPECT_FALSE(hasPhase(*other, "case gradients"));
  EXPECT_FALSE(hasPhase(*other, "case clip"));
  EXPECT_EQ(other->clip->coef, again->clip->coef);
}

TEST(CaseClip, per_kv_head_clips_the_group_of_the_head) {
  const CaseData c = smoothCase(4, 2);  // query heads 2 and 3 read kv head 1
  HeadRequest req;
  req.head = 3;
  req.run.clip_norm = 0.5;
  req.run.clip_scope = ClipScope::per_kv_head;
  const Result<HeadResult> r = compute_head(c, req);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::vector<ClipResult> groups = caseClips(c, ClipScope::per_kv_head, 0.5);
  ASSERT_EQ(groups.size(), size_t{2});
  EXPECT_EQ(r->clip->coef, groups[1].coef);
  EXPECT_EQ(r->clip->total_norm, groups[1].total_norm);
  EXPECT_NE(groups[0].coef, groups[1].coef);
  EXPECT_EQ(r->clip->names.size(), size_t{4});  // dK, dV of kv head 1, dQ of heads 2 and 3
}

}  // namespace
}  // namespace attnscope::test
