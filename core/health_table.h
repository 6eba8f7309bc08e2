// The attention health statistics a recording holds (/health, schema 1.2; written by
// attnscope_record's stats.py): per recorded call and query head, the logit, softmax and
// gradient statistics of one step. Read by core/io (read_health_table), fitted over steps by
// core/analysis/health.h.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace attnscope {

// The statistics of one head of one call, in the order of HealthHead::values.
enum class HealthStat : int {
  max_abs_logit,  // max |scale * q.k| over the sampled rows, every key of their sequence
  logit_bound,    // |scale| * max |q_i| * max |k_j|: bounds every logit of the head
  min_lse,        // LSE of the softmax, over sampled rows seeing >= 2 keys
  max_lse,
  mean_entropy,  // row entropy of P in nats, same rows
  min_entropy,
  dominant_share,  // share of those rows whose max P > 0.99
  max_abs_o,
  norm_do,  // Frobenius norm of the head's gradient (dk, dv: its kv head's); NaN: none
  norm_dq,
  norm_dk,
  norm_dv,
  nonfinite,  // NaN / Inf elements of o, do, dq of the head, dk, dv of its kv head
  count
};
inline constexpr int kHealthStats = static_cast<int>(HealthStat::count);

// Column names as the recorder writes them (`columns` attribute), indexed by HealthStat.
const char* health_stat_name(HealthStat s);

// One recorded call: identity, the semantics its score limit depends on, and where its heads'
// rows start in HealthTable::heads.
struct HealthCall {
  int64_t step = 0;
  int64_t micro_batch = 0;
  int64_t layer = 0;  // call index within the micro-batch
  std::string name;   // calling module ("model.layers.0.self_attn"), or the function
  std::string backend;
  std::string dtype;           // precision the kernel ran in
  std::string autocast_dtype;  // "" when not under autocast
  std::string device;
  double scale = 0;
  int64_t heads = 0, kv_heads = 0, seqlen_q = 0, seqlen_k = 0;
  int64_t rows = 0;       // query rows sampled per sequence
  int rank = -1;          // rank of a run folder's file; -1 for a single dump
  size_t first_head = 0;  // HealthTable::heads index of its head 0
};

struct HealthHead {
  std::array<float, kHealthStats> values{};
  float operator[](HealthStat s) const { return values[static_cast<int>(s)]; }
};

struct HealthTable {
  std::vector<std::string> files;  // the dump, or a run folder's rank files
  std::vector<HealthCall> calls;   // in recording order
  std::vector<HealthHead> heads;   // each call's heads, consecutive
  bool empty() const { return calls.empty(); }
};

}  // namespace attnscope
