// RecordedFeed (see recorded_feed.h): per tensor a RecordedComparer fed head by head, or the
// reference gathered whole (lse; a gradient summed over the batch) and compared at the end.
#include "core/analysis/recorded_feed.h"

#include <algorithm>

#include "core/analysis/recorded_conventions.h"
#include "core/replay.h"

namespace attnscope {
namespace {

const std::vector<float>& run_output(const ModeRun& r, const std::string& name) {
  if (name == "o") return r.out.o;
  if (name == "lse") return r.out.lse;
  return name == "dq" ? r.out.dq : name == "dk" ? r.out.dk : r.out.dv;
}

// Where a group holds the reference of recorded tensor `name`.
const double* GroupReference::*group_member(const std::string& name) {
  if (name == "o") return &GroupReference::o;
  if (name == "lse") return &GroupReference::lse;
  return name == "dq"   ? &GroupReference::dq
         : name == "dk" ? &GroupReference::dk
                        : &GroupReference::dv;
}

TensorGeometry geometry_of(const AttnParams& p, const std::string& name) {
  const bool kv = name == "dk" || name == "dv";
  const int64_t heads = kv ? p.kv_heads : p.heads;
  const int64_t rows = kv ? p.seqlen_k : p.seqlen_q;
  const int64_t cols = name == "lse"                   ? 1
                       : (name == "o" || name == "dv") ? p.head_dim_v
                                                       : p.head_dim;
  return {p.batch * heads, rows, cols, heads};
}

}  // namespace

RecordedFeed::RecordedFeed(const CaseData& data, const AttnParams& params, const ModeRun& run,
                           const ModeRun* baseline, const Replay& replay, bool gradients,
                           int threads)
    : data_(data), p_(params) {
  std::vector<std::string> compared;
  for (const char* name : kRecordedNames) {
    const std::string n = name;
    if (data.find(n) == nullptr || (n[0] == 'd' && !gradients)) continue;
    if (replay.score_mod_unavailable) continue;
    if (replay.dropout == DropoutReplay::unavailable && n != "lse") continue;
    compared.push_back(n);
  }
  // The baseline's backward runs only for a gradient that is compared.
  const bool any_gradient = std::any_of(compared.begin(), compared.end(),
                                        [](const std::string& n) { return n[0] == 'd'; });
  if (baseline == nullptr) group_baseline_.emplace(data, params, any_gradient, threads);
  for (const std::string& n : compared) {
    const HostTensor* t = data.find(n);
    Tensor& x = tensors_.emplace_back();
    RecordedComparisonInputs& c = x.inputs;
    c.tensor = n;
    c.geometry = geometry_of(p_, n);
    x.reference = group_member(n);
    x.kv = n == "dk" || n == "dv";
    c.recorded = values_of(*t);
    const int64_t batch = data.info.dims.batch;
    x.summed = data.info.dims.batch_summed(n);
    c.same_precision =
        x.summed ? batch_sum_of(run_output(run, n), batch) : values_of(run_output(run, n));
    if (group_baseline_) {
      c.baseline = group_baseline_->reader(n);
    } else {
      c.baseline = x.summed ? batch_sum_of(run_output(*baseline, n), batch)
                            : values_of(run_output(*baseline, n));
    }
    if (x.summed) c.geometry.outer /= batch;
    c.gradient = n[0] == 'd';
    c.stored = stored_precision(t->dtype);
    c.roundings = stored_roundings(replay, n, p_.seqlen_q, p_.seqlen_k, p_.group_size());
    if (x.summed || n == "lse") {
      x.whole.assign(static_cast<size_t>(c.geometry.outer * c.geometry.rows * c.geometry.cols),
                     0.0);
    } else {
      x.comparer.emplace(c);
    }
  }
}

void RecordedFeed::add(const GroupReference& g) {
  const int64_t bkv = g.b * p_.kv_heads + g.g;
  if (group_baseline_ && !tensors_.empty()) group_baseline_->run(bkv, bkv + 1);
  const int64_t G = p_.group_size();
  for (Tensor& x : tensors_) {
    const TensorGeometry& geo = x.inputs.geometry;
    const int64_t per_head = geo.rows * geo.cols;
    const int64_t heads = x.kv ? 1 : G, first = x.kv ? bkv : bkv * G;
    for (int64_t h = 0; h < heads; ++h) {
      const double* values = g.*x.reference + h * per_head;
      if (x.comparer) {
        x.comparer->add(first + h, values, scratch_);
        continue;
      }
      // Summed over the batch: head first + h of batch b is head (first + h) % heads_per_batch.
      const int64_t outer = x.summed ? (first + h) % (x.kv ? p_.kv_heads : p_.heads) : first + h;
      double* into = x.whole.data() + outer * per_head;
      for (int64_t e = 0; e < per_head; ++e) {
        if (x.summed) {
          into[e] += values[e];
        } else {
          into[e] = values[e];
        }
      }
    }
  }
}

std::vector<RecordedComparison> RecordedFeed::finish(std::vector<Finding>& conventions) {
  std::vector<RecordedComparison> out;
  for (Tensor& x : tensors_) {
    if (x.comparer) {
      out.push_back(x.comparer->finish());
      continue;
    }
    x.inputs.reference = &x.whole;
    out.push_back(compare_recorded(x.inputs));
    if (auto base = lse_base_convention(out.back(), x.inputs)) conventions.push_back(*base);
  }
  if (auto layout = lse_layout_finding(data_.info)) conventions.push_back(*layout);
  return out;
}

}  // namespace attnscope
