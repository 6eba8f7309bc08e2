// The first bad case of a dump (DESIGN §4): where a failure starts and which cases it
// propagates into. Within a training step the forward runs layer 0, 1, ... and the backward
// the other way round, so a NaN made in layer L's forward poisons the later layers' inputs and,
// through dO, the earlier layers' gradients; a NaN made in L's backward poisons only the
// earlier layers' gradients. In a multi-rank run each rank's cases are one such sequence: the
// run's first bad case is the earliest (step, micro-batch, layer) origin over the ranks, and
// the ranks with errors in that step say whether the fault is local to one rank or shared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/case_analysis.h"
#include "core/analysis/nonfinite_origin.h"
#include "core/case_model.h"

namespace attnscope {

// What one analysed case contributes to first_bad_case: where it sits and which side of it
// went wrong (the browser's badge of a case is core/view's CaseVerdict).
struct CaseOutcome {
  std::string path;
  std::optional<int64_t> rank;  // the rank that recorded it, in a multi-rank run
  std::optional<int64_t> step, micro_batch, layer;
  std::optional<int64_t> forward_seq, backward_seq;  // RunRecord's: the order the sides ran
  bool forward_error = false;      // an error in the inputs q / k / v / mask / bias or the forward
  bool backward_error = false;     // an error in dO or the gradients
  bool dout_nonfinite = false;     // dO arrived non-finite (poisoned by a later layer)
  bool input_nonfinite = false;    // q / k / v / mask / bias arrived non-finite
  std::vector<std::string> kinds;  // kinds of its error findings, in report order
  std::string forward_lead, backward_lead;        // the first error message of each side
  int64_t forward_head = -1, backward_head = -1;  // the head of that error; -1 = several / none
  std::vector<NonfiniteSite> nonfinite;  // where its replay holds NaN / Inf, in stage order
};

// The outcome of a case from the findings of its analysis at the recorded run.
CaseOutcome outcome_of(const CaseInfo& info, const std::vector<Finding>& findings,
                       std::optional<int64_t> rank = std::nullopt);

// The first NaN / Inf of a run in execution order (nonfinite_origin.h): the case, the side of it
// that ran first with a non-finite value, and its earliest site on that side.
struct FirstNonfinite {
  size_t index = 0;  // into the outcomes
  NonfiniteSite site;
  // "step 5, layer 0, forward (/train/step_005/layer_00): S in batch 0, head 1, rows 3-7 ..."
  std::string text;
};

struct FirstBadCase {
  size_t index = 0;                   // into the outcomes
  bool from_backward = false;         // the failure started in this case's backward
  std::vector<size_t> forward_into;   // later cases of the step whose forward it poisoned
  std::vector<size_t> backward_into;  // earlier cases of the step whose gradients it poisoned
  std::vector<int64_t> later_steps;   // later steps with errors (on any rank)
  int64_t head = -1;                  // the head of the lead error; -1 = several / none
  // A multi-rank run: the ranks with errors in the origin's step, and their scope among
  // world_size ranks: "one_rank", "some_ranks" or "all_ranks"; empty for a single dump.
  std::vector<int64_t> ranks;
  std::string scope;
  std::string text;  // "step 0, layer 1 (/step_000000/layer_01): nonfinite_input, ...; ..."
  std::string lead;  // the origin's first error message on the side where it started
  // Where the first NaN / Inf appeared (first_nonfinite): often another case than the first
  // error (a precision loss can come before any NaN); nullopt when none is non-finite.
  std::optional<FirstNonfinite> nonfinite;
};

// Outcomes in case order (core/case_model.h), a run's ranks one after the other; world_size
// (0 = unknown: the ranks seen) counts the ranks of a run. nullopt when no case has an error.
std::optional<FirstBadCase> first_bad_case(const std::vector<CaseOutcome>& outcomes,
                                           int64_t world_size = 0);

// One side of a case whose replay holds NaN / Inf, in execution order (nonfinite_events).
struct NonfiniteEvent {
  size_t index = 0;                  // into the outcomes
  bool backward = false;             // the case's backward (dO, gradients), else its forward
  std::vector<NonfiniteSite> sites;  // that side's sites, in stage order
  std::string place;                 // "step 5, layer 0, forward (/train/step_005/layer_00)"
};

// Every (case, side) holding a NaN / Inf in execution order: by step and micro-batch, then the
// forward of the layers ascending, then their backward descending, then rank (in the order the
// outcomes list the ranks). Cases without a step attribute but with a layer form one step after
// the others; a case with neither is a step of its own.
std::vector<NonfiniteEvent> nonfinite_events(const std::vector<CaseOutcome>& outcomes);

// The first of nonfinite_events and its first site; nullopt when every case is finite.
std::optional<FirstNonfinite> first_nonfinite(const std::vector<CaseOutcome>& outcomes);

}  // namespace attnscope
