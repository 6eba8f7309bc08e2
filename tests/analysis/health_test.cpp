// analyze_health on statistics tables built here: the series per (layer, head), the score limit
// of the call's kernel, the logit_growth prediction on a known curve, and the notices.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/analysis/health.h"

namespace attnscope {
namespace {

// A table of `steps` steps of one call site with `heads` heads; value(step, head, stat).
HealthTable table_of(int64_t steps, int64_t heads, const std::string& backend,
                     const std::string& dtype,
                     const std::function<float(int64_t, int64_t, HealthStat)>& value,
                     int micro_batches = 1) {
  HealthTable t;
  t.files = {"run.h5"};
  for (int64_t step = 0; step < steps; ++step) {
    for (int micro = 0; micro < micro_batches; ++micro) {
      HealthCall c;
      c.step = step;
      c.micro_batch = micro;
      c.layer = 2;
      c.name = "model.layers.2.self_attn";
      c.backend = backend;
      c.dtype = dtype;
      c.device = "cuda:0";
      c.scale = 0.125;
      c.heads = heads;
      c.first_head = t.heads.size();
      t.calls.push_back(c);
      for (int64_t h = 0; h < heads; ++h) {
        HealthHead head;
        for (int s = 0; s < kHealthStats; ++s) {
          head.values[s] = value(step, h, static_cast<HealthStat>(s));
        }
        t.heads.push_back(head);
      }
    }
  }
  return t;
}

float quiet(HealthStat s) {
  return s == HealthStat::nonfinite ? 0.0f : 1.0f;
}

TEST(Health, quadratic_logit_growth_predicts_the_fp16_crossing_of_the_eager_kernel) {
  // Head 1's max logit (20 + 0.2 t)^2 reaches 65504 * 0.125 = 8188 at t = 352.4; head 0 flat.
  const HealthTable t =
      table_of(200, 2, "eager", "float16", [](int64_t step, int64_t h, HealthStat s) {
        if (s != HealthStat::max_abs_logit) return quiet(s);
        return h == 1 ? static_cast<float>(std::pow(20.0 + 0.2 * step, 2)) : 30.0f;
      });
  const HealthReport r = analyze_health(t);
  ASSERT_EQ(r.series.size(), 2u);
  EXPECT_DOUBLE_EQ(r.series[1].limit, 65504.0 * 0.125);
  EXPECT_NE(r.series[1].limit_text.find("fp16 Q K^T"), std::string::npos);
  ASSERT_EQ(r.warnings.size(), 1u);
  const HealthWarning& w = r.warnings[0];
  EXPECT_EQ(w.kind, "logit_growth");
  EXPECT_EQ(w.severity, "warning");
  EXPECT_EQ(r.series[w.series].head, 1);
  ASSERT_TRUE(w.predicted_step && w.trend);
  EXPECT_EQ(w.trend->power, 2);
  EXPECT_NEAR(static_cast<double>(*w.predicted_step), 352.4, 2.0);
  EXPECT_FALSE(w.crossed);
  EXPECT_TRUE(w.within_horizon);
  EXPECT_TRUE(r.predicts_failure());
  // Warned once the logit came within 10x of the limit: (20 + 0.2 t)^2 >= 818.8 at t = 43.
  EXPECT_GE(w.first_step, 43);
  EXPECT_LE(w.first_step, 50);
  EXPECT_FALSE(w.remedies.empty());

  HealthOptions near;
  near.horizon = 100;  // 352 is beyond step 199 + 100
  EXPECT_FALSE(analyze_health(t, near).predicts_failure());
}

TEST(Health, fused_kernels_have_fp32_scores_and_no_prediction) {
  const HealthTable t =
      table_of(200, 1, "sdpa_flash", "float16", [](int64_t step, int64_t, HealthStat s) {
        return s == HealthStat::max_abs_logit ? static_cast<float>(std::pow(20.0 + 0.2 * step, 2))
                                              : quiet(s);
      });
  const HealthReport r = analyze_health(t);
  EXPECT_GT(r.series[0].limit, 1e37);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_FALSE(r.predicts_failure());
}

TEST(Health, micro_batches_aggregate_into_one_step) {
  int calls = 0;
  const HealthTable t = table_of(
      20, 1, "eager", "float16",
      [&](int64_t, int64_t, HealthStat s) {
        if (s == HealthStat::max_abs_logit) return static_cast<float>(++calls % 2 ? 5 : 7);
        return s == HealthStat::nonfinite ? 1.0f : quiet(s);
      },
      2);
  const HealthReport r = analyze_health(t);
  ASSERT_EQ(r.series.size(), 1u);
  ASSERT_EQ(r.series[0].steps.size(), 20u);
  EXPECT_EQ(r.series[0].at(0, HealthStat::max_abs_logit), 7.0);
  EXPECT_EQ(r.series[0].at(0, HealthStat::nonfinite), 2.0);  // summed
  ASSERT_TRUE(r.first_nonfinite);
  EXPECT_EQ(r.first_nonfinite->step, 0);
}

TEST(Health, a_gradient_spike_and_an_lse_cliff_are_notices) {
  const HealthTable t =
      table_of(40, 1, "sdpa_cudnn", "bfloat16", [](int64_t step, int64_t, HealthStat s) {
        if (s == HealthStat::norm_dq) return step == 30 ? 50.0f : 1.0f;
        if (s == HealthStat::min_lse) return step == 35 ? -100.0f : 0.0f;
        return quiet(s);
      });
  const HealthReport r = analyze_health(t);
  ASSERT_EQ(r.warnings.size(), 2u);
  EXPECT_EQ(r.warnings[0].kind, "gradient_spike");
  EXPECT_EQ(r.warnings[0].step, 30);
  EXPECT_EQ(r.warnings[1].kind, "lse_cliff");
  EXPECT_EQ(r.warnings[1].step, 35);
  for (const HealthWarning& w : r.warnings) EXPECT_EQ(w.severity, "notice");
  EXPECT_FALSE(r.predicts_failure());
  // The eager kernel keeps P: its LSE is no cliff.
  const HealthTable eager =
      table_of(40, 1, "eager", "bfloat16", [](int64_t step, int64_t, HealthStat s) {
        return s == HealthStat::min_lse ? (step == 35 ? -100.0f : 0.0f) : quiet(s);
      });
  EXPECT_TRUE(analyze_health(eager).warnings.empty());
}

}  // namespace
}  // namespace attnscope
