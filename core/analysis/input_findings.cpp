// Findings about the inputs and the masking: nonfinite_input (q / k / v / dO / bias, including
// finite values that overflow when cast to the precision), masked_nan_leak (a non-finite key
// or value hidden by the mask still poisons the rows that cannot see it) and
// mask_fill_overflow (a fill value or bias sentinel that becomes -inf in the precision).
#include <algorithm>
#include <cmath>

#include "core/analysis/analysis_context.h"
#include "core/analysis/remedies.h"
#include "kernels/precision.h"

namespace attnscope {
namespace {

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

// Non-finite once stored in the precision (a finite value beyond its range becomes inf).
bool bad_in(Precision p, double x) {
  return !std::isfinite(x) || !std::isfinite(round_to(p, static_cast<float>(x)));
}

struct InputTensor {
  const char* name;
  const HostTensor& data;  // [B, heads, rows, dim]
  int64_t heads, rows, dim;
  const char* head_label;
  const char* rows_label;
};

void nonfinite_tensor(const AnalysisContext& cx, const InputTensor& t, std::vector<Finding>& out) {
  std::vector<HeadHit> hits;
  for (int64_t outer = 0; outer < cx.in.params.batch * t.heads; ++outer) {
    int64_t nan = 0, inf = 0, cast = 0;
    IndexRange rows;
    const std::vector<double> head = read_values(t.data, outer * t.rows * t.dim, t.rows * t.dim);
    const double* x = head.data();
    for (int64_t r = 0; r < t.rows; ++r) {
      bool row_bad = false;
      for (int64_t c = 0; c < t.dim; ++c) {
        const double v = x[r * t.dim + c];
        if (!bad_in(cx.precision(), v)) continue;
        row_bad = true;
        ++(std::isnan(v) ? nan : std::isinf(v) ? inf : cast);
      }
      if (row_bad) rows = rows.merged({r, r});
    }
    if (!rows.valid()) continue;
    std::string tag = count_text(nan) + " NaN, " + count_text(inf) + " inf";
    if (cast > 0) {
      tag += " and " + count_text(cast) + " finite values beyond " + cx.precision_text() + " max " +
             num(finfo_max(cx.precision())) + " (inf once cast)";
    }
    hits.push_back({outer / t.heads, outer % t.heads, rows, {}, nan + inf + cast, tag});
  }
  for (const HitGroup& g : group_hits(hits)) {
    Finding f = located(FindingKind::nonfinite_input, Severity::error, t.name, g);
    // Heads grouped share one tag: the counts are per head, the total is the group's.
    const bool several = g.heads.valid() && g.heads.last > g.heads.first;
    f.message =
        std::string(t.name) + " holds " + g.tag +
        (several ? " per " + std::string(t.head_label) + " (" + count_text(g.count) + " in all)"
                 : std::string()) +
        " in " + where_text(g, t.head_label, t.rows_label, cx.group_of(t.head_label));
    f.remedy = remedy_nonfinite_input(t.name);
    out.push_back(f);
  }
}

// NaN / +inf bias entries (-inf is intentional masking), per broadcast slice.
void nonfinite_bias(const AnalysisContext& cx, std::vector<Finding>& out) {
  const AttnParams& p = cx.in.params;
  if (p.bias == nullptr) return;
  const BroadcastStrides& st = p.bias_strides;
  const int64_t nb = st.b ? p.batch : 1, nh = st.h ? p.heads : 1;
  const int64_t nq = st.q ? p.seqlen_q : 1, nk = st.k ? p.seqlen_k : 1;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      HitGroup g{st.b ? b : -1, st.h ? IndexRange{h, h} : IndexRange{}, {}, {}, 0, "", {}};
      for (int64_t i = 0; i < nq; ++i) {
        for (int64_t j = 0; j < nk; ++j) {
          const double v = p.bias[b * st.b + h * st.h + i * st.q + j * st.k];
          const bool positive_overflow =
              round_to(cx.precision(), static_cast<float>(v)) == INFINITY;
          if (!std::isnan(v) && !positive_overflow) continue;  // -inf (even rounded) is masking
          ++g.count;
          g.rows = g.rows.merged({i, i});
          g.cols = g.cols.merged({j, j});
        }
      }
      if (g.count == 0) continue;
      Finding f = located(FindingKind::nonfinite_input, Severity::error, "bias", g);
      f.message = "bias holds " + count_text(g.count) + " NaN / +inf entries (in " +
                  cx.precision_text() + ") in " + where_text(g, "head", "rows");
      f.remedy = remedy_nonfinite_input("bias");
      out.push_back(f);
    }
  }
}

// Key j hidden from query i by the mask, causality, a -inf bias or a sentinel bias.
bool hidden(const AttnParams& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  return is_masked(p, b, h, i, j) || bias_at(p, b, h, i, j) <= kBiasSentinel;
}

bool row_nonfinite(const std::vector<float>& x, int64_t row, int64_t dim) {
  for (int64_t c = 0; c < dim; ++c) {
    if (!std::isfinite(x[at(row * dim + c)])) return true;
  }
  return false;
}

void masked_nan_leak(const AnalysisContext& cx, std::vector<Finding>& out) {
  const AttnParams& p = cx.in.params;
  const int64_t Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim, Dv = p.head_dim_v;
  // Row `row` of x [*, dim], or of the loaded tensor x (read alone).
  const auto bad_row = [&](const std::vector<double>& x, int64_t row, int64_t dim) {
    for (int64_t c = 0; c < dim; ++c) {
      if (bad_in(cx.precision(), x[at(row * dim + c)])) return true;
    }
    return false;
  };
  const auto bad_stored_row = [&](const HostTensor& x, int64_t row, int64_t dim) {
    return bad_row(read_values(x, row * dim, dim), 0, dim);
  };
  std::vector<HeadHit> hits;
  std::vector<std::vector<const ModeRun*>> hit_runs;
  for (int64_t bkv = 0; bkv < p.batch * p.kv_heads; ++bkv) {
    std::vector<int64_t> bad_keys;
    bool bad_k = false, bad_v = false;
    const std::vector<double> k = read_values(cx.data.k(), bkv * Sk * D, Sk * D);
    const std::vector<double> v = read_values(cx.data.v(), bkv * Sk * Dv, Sk * Dv);
    for (int64_t j = 0; j < Sk; ++j) {
      const bool k_j = bad_row(k, j, D), v_j = bad_row(v, j, Dv);
      if (k_j || v_j) bad_keys.push_back(j);
      bad_k = bad_k || k_j;
      bad_v = bad_v || v_j;
    }
    if (bad_keys.empty()) continue;
    const int64_t b = bkv / p.kv_heads, g = bkv % p.kv_heads;
    for (int64_t h = g * p.group_size(); h < (g + 1) * p.group_size(); ++h) {
      HeadHit hit{b,  h,
                  {}, {bad_keys.front(), bad_keys.back()},
                  0,  bad_k && bad_v ? "k and v" : bad_k ? "k" : "v"};
      std::vector<const ModeRun*> runs;
      for (int64_t i = 0; i < Sq; ++i) {
        const int64_t row = (b * p.heads + h) * Sq + i;
        bool masked_bad = false, visible_bad = false;
        for (int64_t j : bad_keys) (hidden(p, b, h, i, j) ? masked_bad : visible_bad) = true;
        if (!masked_bad || visible_bad || bad_stored_row(cx.data.q(), row, D)) continue;
        // The forward shows the leak whatever dO holds (a real NaN step has NaN in dO
        // everywhere); dQ counts only where dO is finite.
        const bool dout_ok = cx.dout() == nullptr || !bad_stored_row(*cx.dout(), row, Dv);
        bool leaked = false;
        for (const ModeRun& r : cx.runs) {
          if (!row_nonfinite(r.out.o, row, Dv) && !(dout_ok && row_nonfinite(r.out.dq, row, D))) {
            continue;
          }
          leaked = true;
          if (std::find(runs.begin(), runs.end(), &r) == runs.end()) runs.push_back(&r);
        }
        if (!leaked) continue;
        hit.rows = hit.rows.merged({i, i});
        ++hit.count;
      }
      if (hit.count == 0) continue;
      hits.push_back(hit);
      hit_runs.push_back(runs);
    }
  }
  for (const HitGroup& g : group_hits(hits)) {
    const std::vector<const ModeRun*>& runs = hit_runs[g.hits.front()];
    Finding f = located(FindingKind::masked_nan_leak, Severity::error, g.tag, g);
    f.message = g.tag + " holds NaN/Inf at " + range_text("keys", g.cols) + " that " +
                count_text(g.count) + " query rows (" +
                where_text({g.batch, g.heads, g.rows, {}, 0, "", {}}) +
                ") cannot see, yet their O / dQ is non-finite in " + cx.runs_text(runs) +
                " (0 x NaN in P V and dS K)";
    f.remedy = remedy_masked_nan_leak();
    f.precision = cx.precision_text();
    f.modes = cx.mode_names(runs);
    out.push_back(f);
  }
}

// Rows of the given class whose O is non-finite in run r; returns the count over all heads.
int64_t nan_rows(const AnalysisContext& cx, const ModeRun& r, RowMask cls) {
  const AttnParams& p = cx.in.params;
  int64_t n = 0;
  for (int64_t row = 0; row < p.batch * p.heads * p.seqlen_q; ++row) {
    if (cx.masks.row_mask[at(row)] == cls && row_nonfinite(r.out.o, row, p.head_dim_v)) ++n;
  }
  return n;
}

void mask_fill_overflow(const AnalysisContext& cx, std::vector<Finding>& out) {
  const std::string prec = cx.precision_text();
  const std::string range = "(" + prec + " max " + num(finfo_max(cx.precision())) + ")";
  for (const BiasOverflow& bo : cx.masks.bias_overflow) {
    std::vector<const ModeRun*> nan_runs;
    int64_t rows = 0;
    for (const ModeRun& r : cx.runs) {
      const int64_t n = nan_rows(cx, r, RowMask::sentinel);
      if (n > 0) nan_runs.push_back(&r);
      rows = std::max(rows, n);
    }
    HitGroup g{bo.batch, bo.head >= 0 ? IndexRange{bo.head, bo.head} : IndexRange{},
               bo.rows,  bo.cols,
               bo.count, "",
               {}};
    Finding f = located(FindingKind::mask_fill_overflow,
                        nan_runs.empty() ? Severity::warning : Severity::error, "bias", g);
    f.message = "bias holds " + count_text(bo.count) + " finite entries down to " +
                num(bo.min_value) + " that round to -inf in " + prec + " " + range + " in " +
                where_text(g);
    if (!nan_runs.empty()) {
      f.message += "; " + count_text(rows) +
                   " query rows (summed over heads) masked only by them " + "turn NaN in " +
                   cx.runs_text(nan_runs);
    }
    f.remedy = remedy_mask_fill_overflow(cx.precision(), true);
    f.precision = prec;
    f.modes = cx.mode_names(nan_runs);
    out.push_back(f);
  }
  if (!cx.masks.fill_overflows || cx.masks.fill_masked_entries == 0) return;
  for (const ModeRun& r : cx.runs) {
    if (r.mode != Mode::unfused) continue;  // the fused kernel keeps the fill in fp32
    const int64_t rows = nan_rows(cx, r, RowMask::hard);
    Finding f;
    f.kind = FindingKind::mask_fill_overflow;
    f.severity = rows > 0 ? Severity::error : Severity::warning;
    f.tensor = "S";
    f.count = cx.masks.fill_masked_entries;
    f.message = "mask fill " + num(cx.masks.fill_value) + " is not representable in " + prec + " " +
                range + ": the " + count_text(f.count) + " masked scores become -inf in unfused " +
                prec;
    if (rows > 0) {
      f.message +=
          "; " + count_text(rows) + " fully masked query rows (summed over heads) turn NaN";
    }
    f.remedy = remedy_mask_fill_overflow(cx.precision(), false);
    f.precision = prec;
    f.modes = {"unfused"};
    out.push_back(f);
  }
}

}  // namespace

void add_input_findings(const AnalysisContext& cx, std::vector<Finding>& out) {
  const AttnParams& p = cx.in.params;
  const int64_t H = p.heads, Hk = p.kv_heads, Sq = p.seqlen_q, Sk = p.seqlen_k;
  nonfinite_tensor(cx, {"q", cx.data.q(), H, Sq, p.head_dim, "head", "rows"}, out);
  nonfinite_tensor(cx, {"k", cx.data.k(), Hk, Sk, p.head_dim, "kv head", "keys"}, out);
  nonfinite_tensor(cx, {"v", cx.data.v(), Hk, Sk, p.head_dim_v, "kv head", "keys"}, out);
  if (const HostTensor* dout = cx.dout()) {
    nonfinite_tensor(cx, {"dO", *dout, H, Sq, p.head_dim_v, "head", "rows"}, out);
  }
  nonfinite_bias(cx, out);
  masked_nan_leak(cx, out);
  mask_fill_overflow(cx, out);
}

}  // namespace attnscope
