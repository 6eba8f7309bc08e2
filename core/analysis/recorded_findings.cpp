// Findings against fp64: recorded_mismatch (a recorded o / lse / dq / dk / dv breaking the
// accuracy rule vs the replay of the recorded run, one per tensor with the heads, cosine, norm
// ratio, bad head-dim columns and which side is non-finite), the recorded o's
// silent_zero_row, the recorded lse's exp_overflow, replay_inexact, and precision_loss (a
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

// "; 12 elements NaN/Inf in the recording where fp64 is finite" (and the other side).
std::string nonfinite_sides(const HeadComparison& h) {
  std::string out;
  if (h.recorded_only > 0) {
    out += "; " + count_text(h.recorded_only) +
           " elements are NaN/Inf in the recording where the fp64 replay is finite";
  }
  if (h.reference_only > 0) {
    out += "; " + count_text(h.reference_only) +
           " elements are finite in the recording where the fp64 replay is NaN/Inf";
  }
  return out;
}

// One finding per recorded tensor: the heads breaking the rule, the worst one's evidence.
void recorded_mismatch(const AnalysisContext& cx, std::vector<Finding>& out) {
  for (const RecordedComparison& c : cx.recorded) {
    const bool kv = is_kv_tensor(c.tensor);
    const HeadComparison* worst = nullptr;
    std::vector<HeadHit> hits;
    for (const HeadComparison& h : c.heads) {
      if (h.within_rule) continue;
      IndexRange rows;
      if (h.bad_row_first >= 0) rows = {h.bad_row_first, h.bad_row_last};
      hits.push_back({h.batch, h.head, rows, {}, 1, ""});
      const auto badness = [](const HeadComparison& x) {
        return std::make_pair(x.nonfinite_mismatch, x.max_error);
      };
      if (worst == nullptr || badness(h) > badness(*worst)) worst = &h;
    }
    if (worst == nullptr) continue;
    const std::vector<HitGroup> groups = group_hits(hits);
    HitGroup all{-1, {}, {}, {}, 0, "", {}};
    std::string heads;
    for (size_t n = 0; n < groups.size(); ++n) {
      const HitGroup& g = groups[n];
      all.heads = all.heads.merged(g.heads);
      all.rows = all.rows.merged(g.rows);
      all.count += g.count;
      if (n < 6) {
        heads += (n ? "; " : "") +
                 where_text(g, kv ? "kv head" : "head", "rows", kv ? cx.in.params.group_size() : 1);
      }
    }
    if (groups.size() > 6) heads += "; and " + std::to_string(groups.size() - 6) + " more";
    const bool one_batch = std::all_of(groups.begin(), groups.end(), [&](const HitGroup& g) {
      return g.batch == groups.front().batch;
    });
    all.batch = one_batch ? groups.front().batch : -1;
    const std::string columns = column_text(*worst, c.threshold);
    Finding f = located(FindingKind::recorded_mismatch, Severity::error, c.tensor, all);
    f.count = all.count;
    f.message = "recorded " + c.tensor + " breaks the accuracy rule vs the fp64 replay of the " +
                "recorded run in " + count_text(all.count) + (kv ? " kv heads" : " heads") + " (" +
                heads + "); worst batch " + std::to_string(worst->batch) +
                (kv ? ", kv head " : ", head ") + std::to_string(worst->head) + ": cosine " +
                fixed3(worst->cosine) + ", norm ratio " + num(worst->norm_ratio);
    if (worst->max_error > c.threshold) {
      f.message += ", max error " + num(worst->max_error) + " > " + num(c.threshold) +
                   " allowed (" + (c.tensor[0] == 'd' ? "3" : "2") + " x unfused " +
                   cx.precision_text() + " error " + num(c.baseline_error) + " + floor)";
    }
    f.message += nonfinite_sides(*worst) + columns;
    f.remedy = remedy_recorded_mismatch(c.tensor, !columns.empty());
    out.push_back(f);
  }
}

// Rows of the recorded o that are exactly zero where the fp64 output is not (the hits gathered
// by digest_zero_rows).
void recorded_zero_rows(const AnalysisContext& cx, std::vector<Finding>& out) {
  if (cx.recorded_reference == nullptr) return;
  for (const HitGroup& g : group_hits(cx.recorded_reference->zero_rows)) {
    Finding f = located(FindingKind::silent_zero_row, Severity::error, "o", g);
    f.message = "recorded o is exactly 0 in " + rows_count_text(g) + " of " + where_text(g) +
                " that see keys; the fp64 recomputation is non-zero there";
    f.remedy = remedy_silent_zero_row(true);
    out.push_back(f);
  }
}

// The recorded LSE below a row's max score in the replay by more than log(FLT_MAX).
void recorded_lse_overflow(const AnalysisContext& cx, std::vector<Finding>& out) {
  const HostTensor* lse = cx.data.find("lse");
  if (lse == nullptr || cx.recorded_run == nullptr || cx.replay.score_mod_unavailable) return;
  const AttnParams& p = cx.in.params;
  double worst = 0;
  std::vector<HeadHit> hits;
  for (int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
    HeadHit hit{bh / p.heads, bh % p.heads, {}, {}, 0, ""};
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const int64_t row = bh * p.seqlen_q + i;
      const double gap = static_cast<double>(cx.recorded_run->out.m[at(row)]) - lse->at(row);
      if (!(gap > kExpOverflowArg)) continue;
      worst = std::max(worst, gap);
      hit.rows = hit.rows.merged({i, i});
      ++hit.count;
    }
    if (hit.count > 0) hits.push_back(hit);
  }
  for (const HitGroup& g : group_hits(hits)) {
    Finding f = located(FindingKind::exp_overflow, Severity::error, "lse", g);
    f.message = "recorded lse is below the row max of the recomputed scores by up to " +
                num(worst) + " > " + num(kExpOverflowArg) + " in " + where_text(g) +
                ": a backward computing exp(S - LSE) with it overflows to inf";
    f.remedy = remedy_exp_overflow(true);
    out.push_back(f);
  }
}

// The comparisons the replay cannot make: dropout without its keep-mask, a score_mod the
// kernels cannot replay.
void replay_inexact(const AnalysisContext& cx, std::vector<Finding>& out) {
  const RunRecord& run = cx.data.info.config.run;
  auto note = [](const std::string& text) { return text.empty() ? text : " (" + text + ")"; };
  if (cx.replay.dropout == DropoutReplay::unavailable) {
    Finding f;
    f.kind = FindingKind::replay_inexact;
    f.severity = Severity::info;
    f.tensor = "o";
    f.message = "the run used attention dropout (p = " + num(run.dropout_p) +
                ") but the dump holds no keep-mask" + note(run.dropout_note) +
                ": the recorded o, dq, dk, dv are not compared element-wise and the "
                "recomputation runs without dropout; lse and the inputs are still checked";
    f.remedy = remedy_dropout_unavailable(run.dropout_replay, run.dropout_note);
    out.push_back(f);
  }
  if (cx.replay.score_mod_unavailable) {
    Finding f;
    f.kind = FindingKind::replay_inexact;
    f.severity = Severity::info;
    f.tensor = "S";
    f.message = "the run's FlexAttention score_mod cannot be replayed" + note(run.score_mod_note) +
                ": the recomputation runs without it and the recorded o, lse, dq, dk, dv are "
                "not compared; the inputs are still checked";
    f.remedy =
        "express the score_mod as a softcap, an additive bias (ALiBi, relative positions) or a "
        "mask_mod, which attnscope_record materialises and attnscope replays";
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

// Over the finite values of a loaded tensor, read `dim` values (one row) at a time.
double max_abs(const HostTensor& x, int64_t dim) {
  double m = 0;
  std::vector<double> row(at(dim));
  for (int64_t r = 0; r + dim <= x.numel(); r += dim) {
    x.read_double(r, dim, row.data());
    for (double v : row) {
      if (std::isfinite(v)) m = std::max(m, std::fabs(v));
    }
  }
  return m;
}

// The largest finite L2 norm of a row of `dim` values.
double max_row_norm(const HostTensor& x, int64_t dim) {
  double m = 0;
  std::vector<double> row(at(dim));
  for (int64_t r = 0; r + dim <= x.numel(); r += dim) {
    x.read_double(r, dim, row.data());
    double sq = 0;
    for (double v : row) sq += v * v;
    if (std::isfinite(sq)) m = std::max(m, std::sqrt(sq));
  }
  return m;
}

// The tensors precision_loss judges, in ReferenceDigest::loss order: a run's values and a
// group's reference (kv: the group's kv head, [Sk, cols]; else its G query heads, [Sq, cols]).
struct LossTensor {
  const char* name;
  const std::vector<float>& (*run)(const ModeRun&);
  const double* GroupReference::*reference;
  bool kv;
  bool v_cols;  // cols = Dv, else D
};
constexpr LossTensor kLossTensors[] = {
    {"O", [](const ModeRun& r) -> const std::vector<float>& { return r.out.o; }, &GroupReference::o,
     false, true},
    {"dQ", [](const ModeRun& r) -> const std::vector<float>& { return r.out.dq; },
     &GroupReference::dq, false, false},
    {"dK", [](const ModeRun& r) -> const std::vector<float>& { return r.out.dk; },
     &GroupReference::dk, true, false},
    {"dV", [](const ModeRun& r) -> const std::vector<float>& { return r.out.dv; },
     &GroupReference::dv, true, true},
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

void precision_loss(const AnalysisContext& cx, std::vector<Finding>& out) {
  if (cx.reference == nullptr) return;
  for (const LossStats& t : cx.reference->loss) {
    for (size_t run = 0; run < cx.runs.size(); ++run) {
      const ModeRun& r = cx.runs[run];
      PairStats worst;
      double worst_e = 0;
      int64_t worst_outer = -1, failing = 0;
      for (int64_t o = 0; o < cx.in.params.batch * t.heads; ++o) {
        const PairStats& s = t.run_heads[run][at(o)];
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
      f.modes = {run_name(r)};
      out.push_back(f);
    }
  }
}

}  // namespace

void add_recorded_findings(const AnalysisContext& cx, std::vector<Finding>& out) {
  recorded_mismatch(cx, out);
  recorded_zero_rows(cx, out);
  recorded_lse_overflow(cx, out);
  replay_inexact(cx, out);
}

void add_precision_findings(const AnalysisContext& cx, std::vector<Finding>& out) {
  precision_loss(cx, out);
}

ReferenceDigest start_digest(const AnalysisContext& cx, bool gradients) {
  ReferenceDigest d;
  if (cx.precision() == Precision::f64) return d;
  const AttnParams& p = cx.in.params;
  const double u = unit_roundoff(cx.precision());
  const HostTensor* dout = cx.dout();
  const double dout_max = dout != nullptr ? max_abs(*dout, p.head_dim_v) : 1.0;
  const double dout_norm = dout != nullptr ? max_row_norm(*dout, p.head_dim_v)
                                           : std::sqrt(static_cast<double>(p.head_dim_v));
  const double dp = p.scale * dout_norm * max_row_norm(cx.data.v(), p.head_dim_v);
  const double floors[] = {u * max_abs(cx.data.v(), p.head_dim_v),
                           u * dp * max_abs(cx.data.k(), p.head_dim),
                           u * dp * max_abs(cx.data.q(), p.head_dim), u * dout_max};
  for (size_t t = 0; t < (gradients ? 4 : 1); ++t) {
    const int64_t heads = kLossTensors[t].kv ? p.kv_heads : p.heads;
    d.loss.push_back({kLossTensors[t].name, heads, floors[t],
                      std::vector<std::vector<PairStats>>(
                          cx.runs.size(), std::vector<PairStats>(at(p.batch * heads)))});
  }
  return d;
}

void digest_precision(const AnalysisContext& cx, const GroupReference& g, ReferenceDigest& d) {
  const AttnParams& p = cx.in.params;
  const int64_t G = p.group_size(), bkv = g.b * p.kv_heads + g.g;
  for (size_t t = 0; t < d.loss.size(); ++t) {
    const LossTensor& tensor = kLossTensors[t];
    const int64_t per_head =
        (tensor.v_cols ? p.head_dim_v : p.head_dim) * (tensor.kv ? p.seqlen_k : p.seqlen_q);
    const int64_t heads = tensor.kv ? 1 : G, first = tensor.kv ? bkv : bkv * G;
    for (int64_t x = 0; x < heads; ++x) {
      const int64_t o = first + x;
      if (has_masked_rows(cx, o, tensor.kv)) continue;
      const double* reference = g.*tensor.reference + x * per_head;
      for (size_t run = 0; run < cx.runs.size(); ++run) {
        d.loss[t].run_heads[run][at(o)] =
            compare_values(tensor.run(cx.runs[run]).data() + o * per_head, reference, per_head);
      }
    }
  }
}

void digest_zero_rows(const AnalysisContext& cx, const GroupReference& g, ReferenceDigest& d) {
  const HostTensor* o = cx.data.find("o");
  if (o == nullptr || !cx.replay.exact()) return;
  const AttnParams& p = cx.in.params;
  const int64_t Dv = p.head_dim_v, G = p.group_size();
  std::vector<double> rec(at(Dv));
  for (int64_t x = 0; x < G; ++x) {
    const int64_t bh = (g.b * p.kv_heads + g.g) * G + x;
    HeadHit hit{bh / p.heads, bh % p.heads, {}, {}, 0, ""};
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const int64_t row = bh * p.seqlen_q + i;
      const double* reference = g.o + (x * p.seqlen_q + i) * Dv;
      o->read_double(row * Dv, Dv, rec.data());
      bool rec_zero = true, ref_nonzero = false;
      for (int64_t c = 0; c < Dv; ++c) {
        rec_zero = rec_zero && rec[at(c)] == 0;
        ref_nonzero = ref_nonzero || (std::isfinite(reference[c]) && reference[c] != 0);
      }
      if (!rec_zero || !ref_nonzero || cx.masks.row_mask[at(row)] != RowMask::open) continue;
      hit.rows = hit.rows.merged({i, i});
      ++hit.count;
    }
    if (hit.count > 0) d.zero_rows.push_back(hit);
  }
}

}  // namespace attnscope
