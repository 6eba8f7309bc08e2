// RecordedFeed: the recorded-output check (recorded o, lse, dq, dk, dv against the replay's fp64
// reference, with the accuracy rule's baseline), fed group by group as the reference streams.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/analysis/case_analysis.h"
#include "core/analysis/finding.h"
#include "core/analysis/group_baseline.h"
#include "core/analysis/recorded_check.h"
#include "core/analysis/reference64.h"
#include "core/replay.h"

namespace attnscope {

// The outputs a dump may hold from the real run, in the order they are compared.
constexpr const char* kRecordedNames[] = {"o", "lse", "dq", "dk", "dv"};

// Recorded tensors of `data` vs the replay's fp64 reference, fed group by group as it streams,
// with the accuracy rule's baseline (unfused at the recorded precision) and the replay's kernel
// compared per head too. o, dq, dk, dv are compared head by head as their groups come; lse (one
// value a row) and the gradient of an input broadcast over the batch (its reference the batch's
// sum, in batch order) are gathered whole and compared in finish(). o and the gradients are left
// out when the run's dropout cannot be replayed; the gradients when the reference has none.
// `run` is the replay's own kernel (its first mode) and `baseline` unfused at the recorded
// precision, both under `params` and kept alive by the caller, as is `data`; a null baseline
// is run here group by group as the reference comes (GroupBaseline), the same values.
class RecordedFeed {
 public:
  RecordedFeed(const CaseData& data, const AttnParams& params, const ModeRun& run,
               const ModeRun* baseline, const Replay& replay, bool gradients, int threads);
  // The reference of one (batch, kv group), in stream_reference64's order.
  void add(const GroupReference& g);
  // The comparisons in kRecordedNames order; the lse convention and layout findings go to
  // `conventions`.
  std::vector<RecordedComparison> finish(std::vector<Finding>& conventions);

 private:
  struct Tensor {
    RecordedComparisonInputs inputs;
    const double* GroupReference::*reference = nullptr;  // its values in a group
    bool kv = false;                                     // one kv head a group, else G heads
    bool summed = false;
    std::optional<RecordedComparer> comparer;  // compared head by head
    std::vector<double> whole;                 // else its reference, gathered
  };
  const CaseData& data_;
  const AttnParams& p_;
  std::optional<GroupBaseline> group_baseline_;  // when the caller has no whole baseline
  std::vector<Tensor> tensors_;
  HeadScratch scratch_;  // the comparers' head, one tensor at a time
};

}  // namespace attnscope
