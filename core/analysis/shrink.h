// The minimal reproducer's reduction (issue 46): delta debugging of a loaded case down to the
// smallest part that still shows the same finding under the same run semantics (the replay of
// the recorded run) and no finding kind the case did not show: batches, kv-head groups (a kv
// head with all its query heads, so the GQA mapping stays), query rows and keys (a causal case
// keeps a prefix of both, so row i still sees keys 0..i). Recorded outputs stay only where the
// reduction keeps them exact. Then non-finite input values the failure does not need become 0.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/case_analysis.h"
#include "core/case_model.h"

namespace attnscope {

// What the reduced case must still show: a finding of `kind` on `tensor` ("S", "dQ", ...),
// judged as recorded.
struct ShrinkTarget {
  FindingKind kind = FindingKind::score_overflow;
  std::string tensor;
  int64_t batch = -1, head = -1;  // where it was seen first (tried first), -1 = unknown
  IndexRange rows;
};

// Which part of a canonical case to keep: indices into the original, increasing.
struct CaseSelection {
  std::vector<int64_t> batches, kv_heads, rows, keys;
};

// The part `s` of `data` (canonical tensors [B, H, Sq, D] etc., see CaseData): q / do / o / dq
// rows of the kept batches, the query heads of the kept kv heads and the kept rows; k / v / dk /
// dv of the kept keys; mask / bias / dropout_mask along the dims they are not broadcast in.
// Recorded o / lse / dq are kept while every key a kept row attends is kept (all keys, or a
// causal prefix), dk / dv while every row is kept too; the others are dropped. The result is a
// standalone BHSD case (no packed group, no batch broadcasting).
CaseData select_case(const CaseData& data, const CaseSelection& s);

// Elements of every tensor of a case (the bundle's size measure).
int64_t case_elements(const CaseData& data);

struct ShrinkOptions {
  AnalysisSettings analysis;  // the recorded run (RunChoice left empty)
  std::chrono::duration<double> budget = std::chrono::seconds(60);  // for the reduction
};

struct ShrinkResult {
  CaseData minimal;
  CaseSelection kept;  // of the original case
  Finding finding;     // the target as the minimal case shows it
  int64_t original_elements = 0, minimal_elements = 0;
  int tries = 0;              // analyses run
  bool budget_spent = false;  // stopped by the budget: smaller may exist
  // What was kept on purpose and why, one line each ("all 128 query rows: ...").
  std::vector<std::string> notes;
};

// Finds the target in `whole`, the analysis of `data` at options.analysis (made here when
// null; only its findings and replay are read), and fails (not_found) when it is not there;
// then reduces. The budget counts from there: a real-size case's first analysis alone can
// take most of a minute.
Result<ShrinkResult> shrink_case(const CaseData& data, const ShrinkTarget& target,
                                 const ShrinkOptions& options, const CaseAnalysis* whole = nullptr);

// The first finding of `findings` of `kind` (on `tensor` when not empty), judged as recorded.
const Finding* find_target(const std::vector<Finding>& findings, FindingKind kind,
                           const std::string& tensor);

// Whether a finding of this kind says something about a kernel that a reproducer can show
// (false for cross_sequence_attention and replay_inexact: they are about the user's inputs or
// what the dump lacks).
bool reproducible_kind(FindingKind kind);

}  // namespace attnscope
