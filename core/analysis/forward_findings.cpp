// Forward findings over every run: fully_masked_row (what rows with no visible key produce),
// exp_overflow (an exp argument beyond log(FLT_MAX), or an LSE so negative that exp(-LSE)
// overflows), nonfinite_output (O, and LSE where O is finite) and silent_zero_row.
#include <algorithm>
#include <cmath>

#include "core/analysis/analysis_context.h"
#include "core/analysis/remedies.h"
#include "kernels/cpu/trace_scan.h"

namespace attnscope {
namespace {

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

bool row_finite(const std::vector<float>& x, int64_t row, int64_t dim) {
  for (int64_t c = 0; c < dim; ++c) {
    if (!std::isfinite(x[at(row * dim + c)])) return false;
  }
  return true;
}

// What one run made of fully masked rows of a head: "NaN", "zero" or "uniform".
std::string masked_outcome(const AnalysisContext& cx, const ModeRun& r, int64_t bh) {
  const AttnParams& p = cx.in.params;
  bool any_uniform = false;
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    const int64_t row = bh * p.seqlen_q + i;
    if (cx.masks.row_mask[at(row)] == RowMask::open) continue;
    if (!row_finite(r.out.o, row, p.head_dim_v)) return "NaN";
    if (r.trace.forward.o_max_abs[at(row)] != 0) any_uniform = true;
  }
  return any_uniform ? "uniform" : "zero";
}

std::string outcome_text(const std::string& outcome) {
  if (outcome == "NaN") return "O = NaN";
  if (outcome == "zero") return "O = 0";
  return "O attends uniformly to the masked keys";
}

void fully_masked_rows(const AnalysisContext& cx, std::vector<Finding>& out) {
  if (cx.masks.fully_masked_rows == 0) return;
  const AttnParams& p = cx.in.params;
  std::vector<HeadHit> hits;
  std::vector<std::string> worst;   // per hit
  std::vector<bool> sentinel_only;  // per hit: every hidden key hidden by a finite sentinel
  for (int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
    HeadHit hit{bh / p.heads, bh % p.heads, {}, {}, 0, ""};
    bool sentinel = false, hard = false;
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const RowMask m = cx.masks.row_mask[at(bh * p.seqlen_q + i)];
      if (m == RowMask::open) continue;
      (m == RowMask::sentinel ? sentinel : hard) = true;
      hit.rows = hit.rows.merged({i, i});
      ++hit.count;
    }
    if (hit.count == 0) continue;
    // Runs grouped by outcome: "O = NaN in fused and unfused fp16".
    std::vector<std::pair<std::string, std::vector<const ModeRun*>>> outcomes;
    for (const ModeRun& r : cx.runs) {
      const std::string o = masked_outcome(cx, r, bh);
      auto found = std::find_if(outcomes.begin(), outcomes.end(),
                                [&](const auto& e) { return e.first == o; });
      if (found == outcomes.end()) {
        outcomes.push_back({o, {&r}});
      } else {
        found->second.push_back(&r);
      }
    }
    std::string worst_outcome = "zero";
    hit.tag = sentinel && !hard   ? "every key masked by a finite bias sentinel"
              : hard && !sentinel ? "every key hidden by the mask, causality or a -inf bias"
                                  : "every key hidden by the mask or a bias sentinel";
    for (const auto& [o, runs] : outcomes) {
      hit.tag += (o == outcomes.front().first ? "): " : "; ") + outcome_text(o) + " in " +
                 cx.runs_text(runs);
      if (o == "NaN" || (o == "uniform" && worst_outcome == "zero")) worst_outcome = o;
    }
    hits.push_back(hit);
    worst.push_back(worst_outcome);
    sentinel_only.push_back(sentinel && !hard);
  }
  for (const HitGroup& g : group_hits(hits)) {
    const std::string& o = worst[g.hits.front()];
    // Under `safe` a fully masked row is 0, or NaN only through 0 * NaN from a non-finite
    // value (masked_nan_leak's finding); elsewhere NaN is the masking's own doing: an error.
    // O = 0 and the uniform rows of finite sentinels are what the recorded kernel did
    // (intentional padding) unless a what-if produced them.
    const bool safe = cx.in.params.mask_fill == MaskFill::safe;
    const Severity s = o == "NaN" && !safe            ? Severity::error
                       : o == "uniform" && cx.what_if ? Severity::warning
                                                      : Severity::info;
    Finding f = located(FindingKind::fully_masked_row, s, "O", g);
    f.message = rows_count_text(g) + " attend to no key in " + where_text(g) + " (" + g.tag;
    if (safe && o != "uniform") {
      f.message += o == "NaN" ? "; the kernel gives them P = 0, and 0 x NaN from non-finite "
                                "keys / values turns them NaN (see masked_nan_leak)"
                              : "; intentional padding: the kernel returns O = 0 and zero "
                                "gradients there, they would be NaN under eager math "
                                "attention or PyTorch < 2.5";
    }
    // A finite sentinel whose row still turned NaN: S + bias fell below the precision's range
    // and rounded to -inf (an eager fp16 softmax over finfo.min + scores).
    const bool sentinel_overflow = o == "NaN" && sentinel_only[g.hits.front()];
    if (sentinel_overflow) {
      f.message += "; the finite sentinel plus the scores is below -" +
                   num(finfo_max(p.precision)) + " (" + cx.precision_text() +
                   " max) and rounds to -inf, so every score of the row is -inf and softmax "
                   "gives NaN";
    }
    f.remedy = remedy_fully_masked_row(o, sentinel_overflow);
    f.precision = cx.precision_text();
    for (const ModeRun& r : cx.runs) f.modes.push_back(run_name(r));
    out.push_back(f);
  }
}

void exp_overflow(const AnalysisContext& cx, std::vector<Finding>& out) {
  const AttnParams& p = cx.in.params;
  const RunRowHits overflowed = row_hits(cx, [&](const ModeRun& r, int64_t row) {
    return provenance_at(r.trace.forward.lse_provenance, row) == Provenance::exp_overflow ||
           provenance_at(r.trace.forward.o_provenance, row * p.head_dim_v) ==
               Provenance::exp_overflow;
  });
  for (const HitGroup& g : group_hits(overflowed.hits)) {
    Finding f = located(FindingKind::exp_overflow, Severity::error, "P", g);
    f.message = "an exp argument exceeded " + num(kExpOverflowArg) + " (log of fp32 max) in " +
                where_text(g) + ": exp overflowed to inf in " + g.tag;
    f.remedy = remedy_exp_overflow(false);
    f.precision = cx.precision_text();
    f.modes = cx.mode_names(overflowed.runs_of(g));
    out.push_back(f);
  }
  // Note: a finite LSE below -88.72 in a row that sees keys (fully masked rows have their own
  // finding): exp(-LSE) is inf in fp32, a risk only for kernels that split the exp.
  double min_lse = 0;
  const RunRowHits low = row_hits(cx, [&](const ModeRun& r, int64_t row) {
    const float lse = r.out.lse[at(row)];
    if (!std::isfinite(lse) || lse >= -kExpOverflowArg ||
        cx.masks.row_mask[at(row)] != RowMask::open) {
      return false;
    }
    min_lse = std::min(min_lse, static_cast<double>(lse));
    return true;
  });
  for (const HitGroup& g : group_hits(low.hits)) {
    Finding f = located(FindingKind::exp_overflow, Severity::info, "LSE", g);
    f.message = "LSE down to " + num(min_lse) + " < -" + num(kExpOverflowArg) + " in " +
                where_text(g) + " (" + g.tag +
                "): a backward that forms exp(-LSE), or recomputes exp(S - LSE) from other "
                "scores, overflows fp32";
    f.remedy = remedy_exp_overflow(false);
    f.precision = cx.precision_text();
    f.modes = cx.mode_names(low.runs_of(g));
    out.push_back(f);
  }
}

// LSE non-finite where O is finite and the row sees keys (O's finding covers the rest).
void nonfinite_lse(const AnalysisContext& cx, std::vector<Finding>& out) {
  const int64_t Dv = cx.in.params.head_dim_v;
  const RunRowHits lse = row_hits(cx, [&](const ModeRun& r, int64_t row) {
    return !std::isfinite(r.out.lse[at(row)]) && row_finite(r.out.o, row, Dv) &&
           cx.masks.row_mask[at(row)] == RowMask::open;
  });
  for (const HitGroup& g : group_hits(lse.hits)) {
    Finding f = located(FindingKind::nonfinite_output, Severity::error, "LSE", g);
    f.message = "LSE is non-finite in " + rows_count_text(g) + " of " + where_text(g) +
                " although O is finite, in " + g.tag;
    f.remedy = remedy_for_cause(Provenance::lse, false);
    f.precision = cx.precision_text();
    f.modes = cx.mode_names(lse.runs_of(g));
    out.push_back(f);
  }
}

// True when dropout dropped every key row `row` = (b * H + h) * Sq + i can see: its O is 0 by
// the run's own randomness.
bool dropped_entirely(const AttnParams& p, int64_t row) {
  if (p.dropout_keep == nullptr) return false;
  const int64_t i = row % p.seqlen_q, bh = row / p.seqlen_q;
  const int64_t b = bh / p.heads, h = bh % p.heads;
  for (int64_t j = 0; j < p.seqlen_k; ++j) {
    if (!is_masked(p, b, h, i, j) && dropout_factor(p, b, h, i, j) != 0) return false;
  }
  return true;
}

void silent_zero_rows(const AnalysisContext& cx, std::vector<Finding>& out) {
  const int64_t Dv = cx.in.params.head_dim_v;
  const RunRowHits zero = row_hits(cx, [&](const ModeRun& r, int64_t row) {
    return cx.masks.row_mask[at(row)] == RowMask::open && r.trace.forward.o_max_abs[at(row)] == 0 &&
           row_finite(r.out.o, row, Dv) && !dropped_entirely(cx.in.params, row);
  });
  for (const HitGroup& g : group_hits(zero.hits)) {
    Finding f = located(FindingKind::silent_zero_row, Severity::warning, "O", g);
    f.message = "O is exactly 0 in " + rows_count_text(g) + " of " + where_text(g) +
                " that see visible keys, in " + g.tag;
    f.remedy = remedy_silent_zero_row(false);
    f.precision = cx.precision_text();
    f.modes = cx.mode_names(zero.runs_of(g));
    out.push_back(f);
  }
}

const std::vector<float>& run_o(const ModeRun& r) {
  return r.out.o;
}
const std::vector<Provenance>& run_o_provenance(const ModeRun& r) {
  return r.trace.forward.o_provenance;
}

}  // namespace

void add_forward_findings(const AnalysisContext& cx, std::vector<Finding>& out) {
  const AttnParams& p = cx.in.params;
  fully_masked_rows(cx, out);
  exp_overflow(cx, out);
  add_nonfinite_findings(
      cx, FindingKind::nonfinite_output,
      {"O", "head", "rows", p.heads, p.seqlen_q, p.head_dim_v, true, run_o, run_o_provenance}, out);
  nonfinite_lse(cx, out);
  silent_zero_rows(cx, out);
}

}  // namespace attnscope
