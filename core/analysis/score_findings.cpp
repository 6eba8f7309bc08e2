// score_overflow: Q K^T (before scaling, as the unfused kernel rounds it) or S beyond the
// precision's max finite value. Heads are scanned in fp64 only when a run produced overflowed
// scores or its fp32 max |S| says they could; intentional -inf from masking never counts.
#include <algorithm>
#include <cmath>

#include "core/analysis/analysis_context.h"
#include "core/analysis/remedies.h"

namespace attnscope {
namespace {

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

// Largest finite visible |S| of head (b, h) in a run's forward tiles.
double head_max_abs_s(const ModeRun& r, int64_t b, int64_t h) {
  const CpuTrace& t = r.trace;
  double best = 0;
  for (int64_t qt = 0; qt < t.q_tiles; ++qt) {
    for (int64_t kt = 0; kt < t.kv_tiles; ++kt) {
      best = std::max(
          best, static_cast<double>(t.forward.tiles[at(t.tile_index(b, h, qt, kt))].max_abs_s));
    }
  }
  return best;
}

// Row i of (b, h) got its non-finite O / LSE from an overflowed score (and it sees keys).
bool overflow_row(const AnalysisContext& cx, const ModeRun& r, int64_t row) {
  return cx.masks.row_mask[at(row)] == RowMask::open &&
         (provenance_at(r.trace.forward.lse_provenance, row) == Provenance::score_overflow ||
          provenance_at(r.trace.forward.o_provenance, row * cx.in.params.head_dim_v) ==
              Provenance::score_overflow);
}

// fp64 maxima of one head's visible scores: per row max |q.k| and max |S|.
struct HeadScan {
  double max_qk = 0, max_s = 0;
  IndexRange rows;  // rows whose |q.k| or |S| exceeds the limit
  int64_t row_count = 0;
};

HeadScan scan_head(const AnalysisContext& cx, int64_t b, int64_t h, double limit) {
  const AttnParams& p = cx.in.params;
  const int64_t D = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k;
  const std::vector<double> q_head = read_values(cx.data.q(), (b * p.heads + h) * Sq * D, Sq * D);
  const std::vector<double> k_head =
      read_values(cx.data.k(), (b * p.kv_heads + p.kv_head_of(h)) * Sk * D, Sk * D);
  const double* q = q_head.data();
  const double* k = k_head.data();
  HeadScan scan;
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    double row_qk = 0, row_s = 0;
    for (int64_t j = 0; j < Sk; ++j) {
      // Masking sentinels are not scores, and a q.k that is already non-finite comes from a
      // non-finite input (nonfinite_input), not from an overflow.
      const double bias = bias_at(p, b, h, i, j);
      if (is_masked(p, b, h, i, j) || bias <= kBiasSentinel) continue;
      double qk = 0;
      for (int64_t c = 0; c < D; ++c) qk += q[i * D + c] * k[j * D + c];
      if (!std::isfinite(qk)) continue;
      double s = p.scale * qk;
      if (p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
      s += bias;
      row_qk = std::max(row_qk, std::fabs(qk));
      if (std::isfinite(s)) row_s = std::max(row_s, std::fabs(s));
    }
    scan.max_qk = std::max(scan.max_qk, row_qk);
    scan.max_s = std::max(scan.max_s, row_s);
    if (row_qk > limit || row_s > limit) {
      scan.rows = scan.rows.merged({i, i});
      ++scan.row_count;
    }
  }
  return scan;
}

}  // namespace

std::optional<double> add_score_findings(const AnalysisContext& cx, std::vector<Finding>& out) {
  const AttnParams& p = cx.in.params;
  const double limit = finfo_max(cx.precision());
  const std::string prec = cx.precision_text();
  std::optional<double> max_qk;
  for (int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
    const int64_t b = bh / p.heads, h = bh % p.heads;
    std::vector<const ModeRun*> broke, held;
    std::vector<int64_t> broke_rows;
    IndexRange rows;
    bool risk = false;
    for (const ModeRun& r : cx.runs) {
      const double s = head_max_abs_s(r, b, h);
      risk = risk || s > limit || (p.softcap == 0 && s / p.scale > limit);
      int64_t n = 0;
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        if (!overflow_row(cx, r, bh * p.seqlen_q + i)) continue;
        ++n;
        rows = rows.merged({i, i});
      }
      (n > 0 ? broke : held).push_back(&r);
      if (n > 0) broke_rows.push_back(n);
    }
    if (!risk && broke.empty()) continue;
    const HeadScan scan = scan_head(cx, b, h, limit);
    max_qk = std::max(max_qk.value_or(0.0), scan.max_qk);
    rows = rows.merged(scan.rows);
    if (!rows.valid()) continue;
    Finding f;
    f.kind = FindingKind::score_overflow;
    f.severity = broke.empty() ? Severity::warning : Severity::error;
    f.tensor = "S";
    f.batch = b;
    f.head = h;
    f.rows = rows;
    f.count =
        std::max(scan.row_count,
                 broke_rows.empty() ? 0 : *std::max_element(broke_rows.begin(), broke_rows.end()));
    const std::string lim = " > " + num(limit) + " (" + prec + " max)";
    // Q K^T beyond the range overflows before the scale is applied (an eager attention rounds
    // the product first): S is then inf whatever the scale, though scaled it would fit.
    f.message = scan.max_qk > limit
                    ? "max |q.k| = " + num(scan.max_qk) + lim +
                          ": Q K^T overflows before the scale is applied, so S is inf whatever "
                          "the scale (scaled in fp64, max |S| would be " +
                          num(scan.max_s) + ")"
                    : "max |S| = " + num(scan.max_s) + lim;
    f.message += " in batch " + std::to_string(b) + ", head " + std::to_string(h) + ", " +
                 range_text("rows", rows);
    for (size_t n = 0; n < broke.size(); ++n) {
      f.message += (n == 0 ? ": " : "; ") + std::string("inf scores in ") +
                   cx.runs_text({broke[n]}) + " -> " + count_text(broke_rows[n]) +
                   " rows of O/LSE non-finite";
    }
    if (!held.empty()) {
      f.message += std::string(broke.empty() ? ": " : "; ") + "finite in " + cx.runs_text(held);
      if (std::any_of(held.begin(), held.end(),
                      [](const ModeRun* r) { return r->mode == Mode::fused; })) {
        f.message += " (the fused kernel keeps scores in fp32)";
      }
    }
    const bool ran_unfused = std::any_of(cx.runs.begin(), cx.runs.end(),
                                         [](const ModeRun& r) { return r.mode == Mode::unfused; });
    if (!ran_unfused) f.message += "; an eager (unfused) " + prec + " attention would overflow";
    f.remedy = remedy_score_overflow(cx.precision(), scan.max_s);
    f.precision = prec;
    f.modes = cx.mode_names(broke.empty() ? held : broke);
    out.push_back(f);
  }
  return max_qk;
}

}  // namespace attnscope
