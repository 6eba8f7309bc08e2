// Findings against the fp64 recomputation: recorded_mismatch (a recorded o / lse / dq / dk /
// dv breaking the accuracy rule per head, with cosine, norm ratio and bad head-dim columns),
// the recorded o's silent_zero_row, the recorded lse's exp_overflow, and precision_loss (a
// finite low-precision run far from fp64).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/analysis/analysis_context.h"
#include "core/analysis/remedies.h"
#include "kernels/cpu/trace_scan.h"

namespace attnscope {
namespace {

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

std::string fixed3(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", x);
  return buf;
}

bool is_kv_tensor(const std::string& name) {
  return name == "dk" || name == "dv";
}

// "; errors confined to head-dim columns 3, 17, 29 (max 0.8; the others <= 1e-3)" when fewer
// than half of the columns break the threshold.
std::string column_text(const HeadComparison& h, double threshold) {
  std::vector<size_t> bad;
  double others = 0, worst = 0;
  for (size_t c = 0; c < h.column_max_error.size(); ++c) {
    if (h.column_max_error[c] > threshold) {
      bad.push_back(c);
      worst = std::max(worst, h.column_max_error[c]);
    } else {
      others = std::max(others, h.column_max_error[c]);
    }
  }
  if (bad.empty() || h.column_max_error.size() < 2 || 2 * bad.size() >= h.column_max_error.size()) {
    return "";
  }
  std::string list;
  for (size_t n = 0; n < bad.size() && n < 8; ++n) list += (n ? ", " : "") + std::to_string(bad[n]);
  if (bad.size() > 8) list += ", ...";
  return "; errors confined to head-dim column" + std::string(bad.size() > 1 ? "s " : " ") + list +
         " (max " + num(worst) + "; the others <= " + num(others) + ")";
}

void recorded_mismatch(const AnalysisContext& cx, std::vector<Finding>& out) {
  const std::string prec = cx.precision_text();
  for (const RecordedComparison& c : cx.recorded) {
    const bool kv = is_kv_tensor(c.tensor);
    for (const HeadComparison& h : c.heads) {
      if (h.within_rule) continue;
      Finding f;
      f.kind = FindingKind::recorded_mismatch;
      f.severity = Severity::error;
      f.tensor = c.tensor;
      f.batch = h.batch;
      f.head = h.head;
      if (h.bad_row_first >= 0) f.rows = {h.bad_row_first, h.bad_row_last};
      const std::string columns = column_text(h, c.threshold);
      f.count = 1;
      f.message = "recorded " + c.tensor + " in batch " + std::to_string(h.batch) + ", " +
                  (kv ? "kv head " : "head ") + std::to_string(h.head) + ": cosine " +
                  fixed3(h.cosine) + " vs the fp64 recomputation, norm ratio " + num(h.norm_ratio) +
                  ", max error " + num(h.max_error) + " > " + num(c.threshold) + " allowed (" +
                  (c.tensor[0] == 'd' ? "3" : "2") + " x unfused " + prec + " error " +
                  num(c.baseline_error) + " + floor)";
      if (h.nonfinite_mismatch > 0) {
        f.message +=
            "; " + count_text(h.nonfinite_mismatch) + " elements finite in one and not the other";
      }
      f.message += columns;
      f.remedy = remedy_recorded_mismatch(c.tensor, !columns.empty());
      out.push_back(f);
    }
  }
}

// Rows of the recorded o that are exactly zero where the fp64 output is not.
void recorded_zero_rows(const AnalysisContext& cx, std::vector<Finding>& out) {
  const HostTensor* o = cx.data.find("o");
  if (o == nullptr || cx.reference == nullptr) return;
  const std::vector<double> rec = o->to_double();
  const AttnParams& p = cx.in.params;
  const int64_t Dv = p.head_dim_v;
  std::vector<HeadHit> hits;
  for (int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
    HeadHit hit{bh / p.heads, bh % p.heads, {}, {}, 0, ""};
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const int64_t row = bh * p.seqlen_q + i;
      bool rec_zero = true, ref_nonzero = false;
      for (int64_t c = 0; c < Dv; ++c) {
        rec_zero = rec_zero && rec[at(row * Dv + c)] == 0;
        const double r = cx.reference->o[at(row * Dv + c)];
        ref_nonzero = ref_nonzero || (std::isfinite(r) && r != 0);
      }
      if (!rec_zero || !ref_nonzero || cx.masks.row_mask[at(row)] != RowMask::open) continue;
      hit.rows = hit.rows.merged({i, i});
      ++hit.count;
    }
    if (hit.count > 0) hits.push_back(hit);
  }
  for (const HitGroup& g : group_hits(hits)) {
    Finding f = located(FindingKind::silent_zero_row, Severity::error, "o", g);
    f.message = "recorded o is exactly 0 in " + rows_count_text(g) + " of " + where_text(g) +
                " that see keys; the fp64 recomputation is non-zero there";
    f.remedy = remedy_silent_zero_row(true);
    out.push_back(f);
  }
}

// The recorded LSE below a row's recomputed max score by more than log(FLT_MAX).
void recorded_lse_overflow(const AnalysisContext& cx, std::vector<Finding>& out) {
  const HostTensor* lse = cx.data.find("lse");
  if (lse == nullptr || cx.runs.empty()) return;
  const std::vector<double> rec = lse->to_double();
  const ModeRun& run = cx.runs.front();
  double worst = 0;
  const RunRowHits hits = row_hits(cx, [&](const ModeRun& r, int64_t row) {
    if (&r != &run) return false;
    const double gap = static_cast<double>(r.out.m[at(row)]) - rec[at(row)];
    if (!(gap > cpu::kExpOverflowArg)) return false;
    worst = std::max(worst, gap);
    return true;
  });
  for (const HitGroup& g : group_hits(hits.hits)) {
    Finding f = located(FindingKind::exp_overflow, Severity::error, "lse", g);
    f.message = "recorded lse is below the row max of the recomputed scores by up to " +
                num(worst) + " > " + num(cpu::kExpOverflowArg) + " in " + where_text(g) +
                ": a backward computing exp(S - LSE) with it overflows to inf";
    f.remedy = remedy_exp_overflow(true);
    out.push_back(f);
  }
}

// Precision loss is judged by e = max |x - fp64| / (max |fp64| + floor) per head: warning
// above 10 %, error above 50 % (the result is mostly rounding noise). The floor, u times the
// scale the tensor's rounding errors naturally have (u: unit roundoff), keeps near-zero
// references (a saturated softmax has dS ~ 0) from turning harmless noise into a finding:
//   O: max |v|;  dV: max |dO|;  dQ: scale max||dO_i|| max||v_j|| max |k|;  dK: same with |q|.
constexpr double kLossWarning = 0.1, kLossError = 0.5;

double unit_roundoff(Precision p) {
  return std::ldexp(1.0, p == Precision::f16 ? -11 : p == Precision::bf16 ? -8 : -24);
}

double max_abs(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) {
    if (std::isfinite(v)) m = std::max(m, std::fabs(v));
  }
  return m;
}

double max_row_norm(const std::vector<double>& x, int64_t dim) {
  double m = 0;
  for (size_t r = 0; r + static_cast<size_t>(dim) <= x.size(); r += static_cast<size_t>(dim)) {
    double sq = 0;
    for (int64_t c = 0; c < dim; ++c)
      sq += x[r + static_cast<size_t>(c)] * x[r + static_cast<size_t>(c)];
    if (std::isfinite(sq)) m = std::max(m, std::sqrt(sq));
  }
  return m;
}

struct LossTensor {
  const char* name;
  const std::vector<float>& (*run)(const ModeRun&);
  const std::vector<double>* ref;
  int64_t heads, per_head;
  double floor;
};

// Query head bh, or (kv) any query head reading kv head bh, holds a fully masked row: its
// values are judged by fully_masked_row, not against fp64 (where a sentinel row still
// attends by its score differences).
bool has_masked_rows(const AnalysisContext& cx, int64_t bh, bool kv) {
  const AttnParams& p = cx.in.params;
  const int64_t group = kv ? p.group_size() : 1, heads = kv ? p.kv_heads : p.heads;
  const int64_t b = bh / heads, first = (bh % heads) * group;
  for (int64_t h = first; h < first + group; ++h) {
    const auto row0 = cx.masks.row_mask.begin() + (b * p.heads + h) * p.seqlen_q;
    if (std::any_of(row0, row0 + p.seqlen_q, [](RowMask m) { return m != RowMask::open; })) {
      return true;
    }
  }
  return false;
}

std::vector<LossTensor> loss_tensors(const AnalysisContext& cx) {
  const AttnParams& p = cx.in.params;
  const double u = unit_roundoff(cx.precision());
  const double dout_max = cx.in.has_dout ? max_abs(cx.in.dout) : 1.0;
  const double dout_norm = cx.in.has_dout ? max_row_norm(cx.in.dout, p.head_dim_v)
                                          : std::sqrt(static_cast<double>(p.head_dim_v));
  const double dp = p.scale * dout_norm * max_row_norm(cx.in.v, p.head_dim_v);
  std::vector<LossTensor> t = {
      {"O", [](const ModeRun& r) -> const std::vector<float>& { return r.out.o; }, &cx.reference->o,
       p.heads, p.seqlen_q* p.head_dim_v, u* max_abs(cx.in.v)}};
  if (!cx.reference->has_gradients) return t;
  t.push_back({"dQ", [](const ModeRun& r) -> const std::vector<float>& { return r.out.dq; },
               &cx.reference->dq, p.heads, p.seqlen_q* p.head_dim, u* dp* max_abs(cx.in.k)});
  t.push_back({"dK", [](const ModeRun& r) -> const std::vector<float>& { return r.out.dk; },
               &cx.reference->dk, p.kv_heads, p.seqlen_k* p.head_dim, u* dp* max_abs(cx.in.q)});
  t.push_back({"dV", [](const ModeRun& r) -> const std::vector<float>& { return r.out.dv; },
               &cx.reference->dv, p.kv_heads, p.seqlen_k* p.head_dim_v, u* dout_max});
  return t;
}

void precision_loss(const AnalysisContext& cx, std::vector<Finding>& out) {
  if (cx.reference == nullptr || cx.precision() == Precision::f64) return;
  for (const LossTensor& t : loss_tensors(cx)) {
    for (const ModeRun& r : cx.runs) {
      PairStats worst;
      double worst_e = 0;
      int64_t worst_outer = -1, failing = 0;
      for (int64_t o = 0; o < cx.in.params.batch * t.heads; ++o) {
        if (has_masked_rows(cx, o, t.heads != cx.in.params.heads)) continue;
        const PairStats s = compare_values(t.run(r).data() + o * t.per_head,
                                           t.ref->data() + o * t.per_head, t.per_head);
        const double e = s.max_error / (s.max_abs_ref + t.floor);
        if (s.nonfinite > 0 || s.nonfinite_mismatch > 0 || !(e > kLossWarning)) continue;
        ++failing;
        if (e > worst_e) {
          worst = s;
          worst_e = e;
          worst_outer = o;
        }
      }
      if (failing == 0) continue;
      Finding f;
      f.kind = FindingKind::precision_loss;
      f.severity = worst_e > kLossError ? Severity::error : Severity::warning;
      f.tensor = t.name;
      f.batch = worst_outer / t.heads;
      f.head = worst_outer % t.heads;
      f.count = failing;
      f.message = std::string(t.name) + " in " + cx.runs_text({&r}) + " is off by up to " +
                  num(100 * worst_e) + "% of its largest value vs fp64 in " + count_text(failing) +
                  (failing > 1 ? " heads" : " head") + " (worst batch " + std::to_string(f.batch) +
                  ", head " + std::to_string(f.head) + ": max error " + num(worst.max_error) +
                  ", max |fp64| " + num(worst.max_abs_ref) + ", cosine " + fixed3(worst.cosine) +
                  ", relative L2 " + num(100 * worst.rel_l2) + "%)";
      f.remedy = remedy_precision_loss(cx.precision());
      f.precision = cx.precision_text();
      f.modes = {mode_name(r.mode)};
      out.push_back(f);
    }
  }
}

}  // namespace

void add_recorded_findings(const AnalysisContext& cx, std::vector<Finding>& out) {
  recorded_mismatch(cx, out);
  recorded_zero_rows(cx, out);
  recorded_lse_overflow(cx, out);
  precision_loss(cx, out);
}

}  // namespace attnscope
