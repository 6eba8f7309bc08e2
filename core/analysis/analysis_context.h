// Internal to core/analysis: what the findings passes read (the case, its runs, the masking
// analysis, the fp64 recomputation, comparisons and clip reports) and the passes themselves.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/case_analysis.h"
#include "core/analysis/finding_text.h"
#include "core/analysis/mask_analysis.h"
#include "core/analysis/recorded_check.h"
#include "core/analysis/reference64.h"
#include "core/kernel_registry.h"

namespace attnscope {

// precision_loss's view of one tensor (O, dQ, dK, dV): each run's heads against fp64.
struct LossStats {
  const char* name = "O";
  int64_t heads = 0;  // per batch: query heads, or kv heads (dK, dV)
  double floor = 0;   // added to a head's max |fp64| (recorded_findings.cpp)
  std::vector<std::vector<PairStats>> run_heads;  // [run][b * heads + h]; fully masked: default
};

// What the findings passes read of an fp64 reference, gathered group by group while it
// streams (stream_reference64), so that the reference is never held whole.
struct ReferenceDigest {
  std::vector<LossStats> loss;     // precision_loss: O, and dQ, dK, dV with the gradients
  std::vector<HeadHit> zero_rows;  // recorded_zero_rows: open rows of recorded o exactly 0
};

struct AnalysisContext {
  const CaseData& data;
  const CaseInputs& in;  // in.params at the analysed precision
  const AnalysisSettings& settings;
  const std::vector<ModeRun>& runs;
  const MaskInfo& masks;
  const ReferenceDigest* reference = nullptr;  // null when not computed
  const std::vector<RecordedComparison>& recorded;
  const std::vector<ClipReport>& clips;
  const Replay& replay;  // what the recorded run did
  // The fp64 reference and the kernel run of the replay (the analysis' own under recorded
  // settings); null when the case holds no recorded output.
  const ReferenceDigest* recorded_reference = nullptr;
  const ModeRun* recorded_run = nullptr;
  bool what_if = false;  // the runs are a what-if, not the replay of the recorded run

  Precision precision() const { return in.params.precision; }
  // The case's dO, or null (dO = 1). The passes read q, k, v, dO from `data` (in's fp64 arrays
  // are empty), a head or a row at a time: read_values.
  const HostTensor* dout() const { return data.find("do"); }
  std::string precision_text() const;  // "fp16"
  // "unfused fp16" for one run; "fused and unfused fp16" for several.
  std::string runs_text(const std::vector<const ModeRun*>& runs) const;
  std::vector<std::string> mode_names(const std::vector<const ModeRun*>& runs) const;
  // The query heads per head of a tensor whose heads are `head_label` ("kv head": the GQA
  // group size; else 1), for where_text.
  int64_t group_of(const std::string& head_label) const {
    return head_label == "kv head" ? in.params.group_size() : 1;
  }
};

// Elements [first, first + n) of a loaded tensor as fp64.
std::vector<double> read_values(const HostTensor& t, int64_t first, int64_t n);

// Non-finite elements of one head of a run's tensor viewed as [outer, rows, dim].
struct NonfiniteHead {
  int64_t outer = 0;  // b * heads + h
  int64_t count = 0;
  IndexRange rows;
  Provenance cause = Provenance::finite;  // most frequent provenance code
};

// row_mask (query-row tensors only, else null): elements of a fully masked row are counted as
// fully_masked_row (every key hidden) or mask_fill (a bias sentinel became -inf), whatever
// the kernel's provenance says.
std::vector<NonfiniteHead> nonfinite_heads(const std::vector<float>& x,
                                           const std::vector<Provenance>& provenance, int64_t outer,
                                           int64_t rows, int64_t dim,
                                           const std::vector<RowMask>* row_mask);

// One tensor of every run, for add_nonfinite_findings.
struct RunTensor {
  const char* name = "O";  // shown in messages and Finding::tensor
  const char* head_label = "head";
  const char* rows_label = "rows";
  int64_t heads = 0, rows = 0, dim = 0;  // per batch: heads; per head: rows x dim
  bool query_rows = false;               // rows are query rows (O, dQ), not keys
  const std::vector<float>& (*data)(const ModeRun&) = nullptr;
  const std::vector<Provenance>& (*provenance)(const ModeRun&) = nullptr;
};

// nonfinite_output / nonfinite_gradient findings of one tensor over every run, one per group
// of heads with the same rows and per-run counts.
void add_nonfinite_findings(const AnalysisContext& cx, FindingKind kind, const RunTensor& t,
                            std::vector<Finding>& out);

// Query rows flagged per run, combined per (batch, head): rows = union over runs, count = the
// most rows any run flagged, tag = the runs that flagged it ("fused and unfused fp16").
struct RunRowHits {
  std::vector<HeadHit> hits;
  std::vector<std::vector<const ModeRun*>> runs;  // per hit
  // The runs of a group of hits (equal tags imply equal runs).
  const std::vector<const ModeRun*>& runs_of(const HitGroup& g) const { return runs[g.hits[0]]; }
};
// flag(run, row) with row = (b * H + h) * Sq + i.
RunRowHits row_hits(const AnalysisContext& cx,
                    const std::function<bool(const ModeRun&, int64_t row)>& flag);

// nonfinite_input, masked_nan_leak, mask_fill_overflow.
void add_input_findings(const AnalysisContext& cx, std::vector<Finding>& out);
// score_overflow; returns the largest |q.k| it scanned (none when no head needed a scan).
std::optional<double> add_score_findings(const AnalysisContext& cx, std::vector<Finding>& out);
// fully_masked_row, exp_overflow, nonfinite_output, silent_zero_row.
void add_forward_findings(const AnalysisContext& cx, std::vector<Finding>& out);
// nonfinite_gradient, gradient_explosion, clip_spreads_nan.
void add_gradient_findings(const AnalysisContext& cx, std::vector<Finding>& out);
// Against the replay of the recorded run: recorded_mismatch, recorded_convention, the recorded
// o / lse's silent_zero_row / exp_overflow, and replay_inexact.
void add_recorded_findings(const AnalysisContext& cx, std::vector<Finding>& out);
// precision_loss: a finite low-precision run far from fp64.
void add_precision_findings(const AnalysisContext& cx, std::vector<Finding>& out);

// A digest whose loss tensors are set up (their floors read from the inputs) for `gradients`,
// before the first group.
ReferenceDigest start_digest(const AnalysisContext& cx, bool gradients);
// precision_loss's pair stats of every run's heads of group g.
void digest_precision(const AnalysisContext& cx, const GroupReference& g, ReferenceDigest& d);
// recorded_zero_rows' hits in the query heads of group g (the case holds a recorded o and the
// replay is exact).
void digest_zero_rows(const AnalysisContext& cx, const GroupReference& g, ReferenceDigest& d);

}  // namespace attnscope
