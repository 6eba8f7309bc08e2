// Names of the health statistics (core/health_table.h).
#include "core/health_table.h"

namespace attnscope {

const char* health_stat_name(HealthStat s) {
  static const char* const kNames[kHealthStats] = {
      "max_abs_logit", "logit_bound",    "min_lse",   "max_lse", "mean_entropy",
      "min_entropy",   "dominant_share", "max_abs_o", "norm_do", "norm_dq",
      "norm_dk",       "norm_dv",        "nonfinite"};
  const int i = static_cast<int>(s);
  return i >= 0 && i < kHealthStats ? kNames[i] : "";
}

}  // namespace attnscope
