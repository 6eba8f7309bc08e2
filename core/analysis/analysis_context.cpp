// Shared helpers of the findings passes: run contexts, per-run row flags combined per head,
// and the nonfinite_output / nonfinite_gradient findings of one tensor.
#include "core/analysis/analysis_context.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "core/analysis/remedies.h"

namespace attnscope {
namespace {

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

std::string cause_text(Provenance p) {
  if (p == Provenance::propagated) return "propagated from poisoned query rows";
  if (p == Provenance::input) return "from a non-finite input";
  return std::string("from ") + provenance_name(p);
}

}  // namespace

std::vector<double> read_values(const HostTensor& t, int64_t first, int64_t n) {
  std::vector<double> x(at(n));
  t.read_double(first, n, x.data());
  return x;
}

std::string AnalysisContext::precision_text() const {
  return precision_name(precision());
}

std::vector<std::string> AnalysisContext::mode_names(
    const std::vector<const ModeRun*>& list) const {
  std::vector<std::string> names;
  for (const ModeRun* r : list) names.push_back(run_name(*r));
  std::sort(names.begin(), names.end());
  return names;
}

std::string AnalysisContext::runs_text(const std::vector<const ModeRun*>& list) const {
  return modes_text(mode_names(list), precision_text());
}

RunRowHits row_hits(const AnalysisContext& cx,
                    const std::function<bool(const ModeRun&, int64_t row)>& flag) {
  const AttnParams& p = cx.in.params;
  RunRowHits out;
  for (int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
    HeadHit hit{bh / p.heads, bh % p.heads, {}, {}, 0, ""};
    std::vector<const ModeRun*> runs;
    for (const ModeRun& r : cx.runs) {
      int64_t n = 0;
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        if (!flag(r, bh * p.seqlen_q + i)) continue;
        ++n;
        hit.rows = hit.rows.merged({i, i});
      }
      if (n == 0) continue;
      hit.count = std::max(hit.count, n);
      runs.push_back(&r);
    }
    if (runs.empty()) continue;
    hit.tag = cx.runs_text(runs);
    out.hits.push_back(hit);
    out.runs.push_back(runs);
  }
  return out;
}

std::vector<NonfiniteHead> nonfinite_heads(const std::vector<float>& x,
                                           const std::vector<Provenance>& provenance, int64_t outer,
                                           int64_t rows, int64_t dim,
                                           const std::vector<RowMask>* row_mask) {
  std::vector<NonfiniteHead> out;
  for (int64_t o = 0; o < outer; ++o) {
    NonfiniteHead head;
    head.outer = o;
    std::array<int64_t, 9> causes{};
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t base = (o * rows + r) * dim;
      const RowMask mask = row_mask ? (*row_mask)[at(o * rows + r)] : RowMask::open;
      bool bad = false;
      for (int64_t c = 0; c < dim; ++c) {
        if (std::isfinite(x[at(base + c)])) continue;
        bad = true;
        ++head.count;
        Provenance p = provenance_at(provenance, base + c);
        if (mask != RowMask::open) {
          p = mask == RowMask::hard ? Provenance::fully_masked_row : Provenance::mask_fill;
        }
        ++causes[static_cast<size_t>(p)];
      }
      if (bad) head.rows = head.rows.merged({r, r});
    }
    if (head.count == 0) continue;
    causes[0] = 0;
    head.cause =
        static_cast<Provenance>(std::max_element(causes.begin(), causes.end()) - causes.begin());
    out.push_back(head);
  }
  return out;
}

void add_nonfinite_findings(const AnalysisContext& cx, FindingKind kind, const RunTensor& t,
                            std::vector<Finding>& out) {
  const int64_t outer = cx.in.params.batch * t.heads;
  // Per head: (count, cause) -> runs, and the union of rows.
  std::map<int64_t, std::map<std::pair<int64_t, Provenance>, std::vector<const ModeRun*>>> by_head;
  std::map<int64_t, IndexRange> rows;
  for (const ModeRun& r : cx.runs) {
    const std::vector<RowMask>* masks = t.query_rows ? &cx.masks.row_mask : nullptr;
    for (const NonfiniteHead& h :
         nonfinite_heads(t.data(r), t.provenance(r), outer, t.rows, t.dim, masks)) {
      by_head[h.outer][{h.count, h.cause}].push_back(&r);
      rows[h.outer] = rows[h.outer].merged(h.rows);
    }
  }
  std::vector<HeadHit> hits;
  std::vector<std::vector<const ModeRun*>> hit_runs;
  std::vector<Provenance> hit_cause;
  for (const auto& [o, variants] : by_head) {
    HeadHit hit{o / t.heads, o % t.heads, rows[o], {}, 0, ""};
    std::vector<const ModeRun*> runs;
    for (const auto& [key, list] : variants) {
      hit.tag += (hit.tag.empty() ? "" : "; ") + count_text(key.first) + " in " +
                 cx.runs_text(list) + " (" + cause_text(key.second) + ")";
      hit.count = std::max(hit.count, key.first);
      runs.insert(runs.end(), list.begin(), list.end());
    }
    hits.push_back(hit);
    hit_runs.push_back(runs);
    hit_cause.push_back(variants.begin()->first.second);
  }
  const bool gradient = kind == FindingKind::nonfinite_gradient;
  for (const HitGroup& g : group_hits(hits)) {
    Finding f = located(kind, Severity::error, t.name, g);
    f.count = g.count;
    f.message = std::string(t.name) + " has non-finite elements in " +
                where_text(g, t.head_label, t.rows_label, cx.group_of(t.head_label)) + ": " +
                g.tag + (g.heads.first != g.heads.last ? " per head" : "");
    f.remedy = remedy_for_cause(hit_cause[g.hits.front()], gradient);
    f.precision = cx.precision_text();
    f.modes = cx.mode_names(hit_runs[g.hits.front()]);
    out.push_back(f);
  }
}

}  // namespace attnscope
