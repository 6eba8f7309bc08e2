// Gradient findings over every run: nonfinite_gradient (dQ, dK, dV with provenance),
// gradient_explosion (a head's norm far above the median head, with the upstream dO's share
// and what clip_grad_norm_ would do) and clip_spreads_nan (a non-finite total norm).
#include <algorithm>
#include <cmath>
#include <map>

#include "core/analysis/analysis_context.h"
#include "core/analysis/remedies.h"

namespace attnscope {
namespace {

size_t at(int64_t n) {
  return static_cast<size_t>(n);
}

const std::vector<float>& run_dq(const ModeRun& r) {
  return r.out.dq;
}
const std::vector<float>& run_dk(const ModeRun& r) {
  return r.out.dk;
}
const std::vector<float>& run_dv(const ModeRun& r) {
  return r.out.dv;
}
const std::vector<Provenance>& prov_dq(const ModeRun& r) {
  return r.trace.backward.dq_provenance;
}
const std::vector<Provenance>& prov_dk(const ModeRun& r) {
  return r.trace.backward.dk_provenance;
}
const std::vector<Provenance>& prov_dv(const ModeRun& r) {
  return r.trace.backward.dv_provenance;
}

// Median of the finite values (NaN when there are fewer than 3).
double median(std::vector<double> x) {
  x.erase(std::remove_if(x.begin(), x.end(), [](double v) { return !std::isfinite(v); }), x.end());
  if (x.size() < 3) return NAN;
  std::nth_element(x.begin(), x.begin() + static_cast<long>(x.size() / 2), x.end());
  return x[x.size() / 2];
}

double total_norm(const ModeRun& r) {
  const BackwardTrace& t = r.trace.backward;
  double sq = 0;
  for (const auto* v : {&t.dq_head_norm, &t.dk_head_norm, &t.dv_head_norm}) {
    for (double n : *v) sq += n * n;
  }
  return std::sqrt(sq);
}

// ||dO|| per (b, h) and its median (dO = 1 without a recorded dO: no upstream spike).
std::vector<double> dout_head_norms(const AnalysisContext& cx) {
  const AttnParams& p = cx.in.params;
  const int64_t n = p.seqlen_q * p.head_dim_v;
  std::vector<double> norms(at(p.batch * p.heads), std::sqrt(static_cast<double>(n)));
  if (cx.dout() == nullptr) return norms;
  for (int64_t bh = 0; bh < p.batch * p.heads; ++bh) {
    double sq = 0;
    for (double x : read_values(*cx.dout(), bh * n, n)) sq += x * x;
    norms[at(bh)] = std::sqrt(sq);
  }
  return norms;
}

struct Spike {
  std::string tensor;  // "dQ"
  std::string text;    // "||dQ|| = 2.5e5 (1.1e6 x the median head, 0.23)"
  double ratio = 0;
};

void gradient_explosion(const AnalysisContext& cx, std::vector<Finding>& out) {
  const AttnParams& p = cx.in.params;
  const std::vector<double> dout_norms = dout_head_norms(cx);
  const double dout_median = median(dout_norms);
  const bool same_heads = p.heads == p.kv_heads;
  // (is_kv, b * heads + index) -> the spikes of the first run showing it, and the runs.
  std::map<std::pair<bool, int64_t>, std::pair<std::vector<Spike>, std::vector<const ModeRun*>>>
      found;
  double clip_coef = 1;
  const double max_norm = cx.settings.run.clip_norm.value_or(1.0);
  for (const ModeRun& r : cx.runs) {
    const BackwardTrace& t = r.trace.backward;
    bool any = false;
    const std::pair<const char*, const std::vector<double>*> tensors[] = {
        {"dQ", &t.dq_head_norm}, {"dK", &t.dk_head_norm}, {"dV", &t.dv_head_norm}};
    for (const auto& [name, norms] : tensors) {
      const double med = median(*norms);
      if (!(med > 0)) continue;
      const bool kv = norms != &t.dq_head_norm && !same_heads;
      for (size_t o = 0; o < norms->size(); ++o) {
        const double ratio = (*norms)[o] / med;
        if (!(ratio > cx.settings.explosion_ratio) || !std::isfinite(ratio)) continue;
        any = true;
        auto& entry = found[{kv, static_cast<int64_t>(o)}];
        if (std::find(entry.second.begin(), entry.second.end(), &r) == entry.second.end()) {
          entry.second.push_back(&r);
        }
        if (entry.second.size() > 1) continue;  // numbers of the first run
        entry.first.push_back({name,
                               "||" + std::string(name) + "|| = " + num((*norms)[o]) + " (" +
                                   num(ratio) + " x the median head, " + num(med) + ")",
                               ratio});
      }
    }
    if (any && clip_coef == 1) clip_coef = std::min(1.0, max_norm / (total_norm(r) + 1e-6));
  }
  for (const auto& [key, entry] : found) {
    const auto& [spikes, runs] = entry;
    const int64_t heads = key.first ? p.kv_heads : p.heads;
    Finding f;
    f.kind = FindingKind::gradient_explosion;
    f.severity = Severity::warning;
    f.batch = key.second / heads;
    f.head = key.second % heads;
    f.count = 1;
    std::string tensors, text;
    double ratio = 0;
    for (const Spike& s : spikes) {
      tensors += (tensors.empty() ? "" : "/") + s.tensor;
      text += (text.empty() ? "" : ", ") + s.text;
      ratio = std::max(ratio, s.ratio);
    }
    f.tensor = tensors;
    f.message = text + " in batch " + std::to_string(f.batch) + ", " +
                (key.first ? "kv head " : "head ") + std::to_string(f.head) + " (" +
                cx.runs_text(runs) + ")";
    bool upstream = false;
    if (!key.first && cx.dout() != nullptr && dout_median > 0) {
      const double up = dout_norms[at(key.second)] / dout_median;
      upstream = up >= 0.1 * ratio;
      f.message += "; upstream ||dO|| of this head is " + num(up) + " x the median";
    }
    f.remedy = remedy_gradient_explosion(upstream, clip_coef, max_norm);
    f.precision = cx.precision_text();
    f.modes = cx.mode_names(runs);
    out.push_back(f);
  }
}

int64_t nonfinite_count(const std::vector<float>& x) {
  return std::count_if(x.begin(), x.end(), [](float v) { return !std::isfinite(v); });
}

void clip_spreads_nan(const AnalysisContext& cx, std::vector<Finding>& out) {
  // tag -> runs: runs with the same non-finite pattern share one finding.
  std::map<std::string, std::vector<const ModeRun*>> groups;
  std::map<std::string, int64_t> elements;
  for (const ModeRun& r : cx.runs) {
    const double total = total_norm(r);
    if (std::isfinite(total)) continue;
    const int64_t dq = nonfinite_count(r.out.dq), dk = nonfinite_count(r.out.dk),
                  dv = nonfinite_count(r.out.dv);
    const int64_t all = static_cast<int64_t>(r.out.dq.size() + r.out.dk.size() + r.out.dv.size());
    const std::string coef = std::isnan(total)
                                 ? "coef = NaN and turns all " + count_text(all) +
                                       " gradient elements NaN, the finite heads included"
                                 : "coef = 0: all finite gradient elements become 0 and the " +
                                       count_text(dq + dk + dv) + " inf ones NaN";
    const std::string tag = "total gradient norm ||(dQ, dK, dV)|| is " + num(total) + " (" +
                            count_text(dq) + " / " + count_text(dk) + " / " + count_text(dv) +
                            " non-finite in dQ / dK / dV): clip_grad_norm_ computes " + coef;
    groups[tag].push_back(&r);
    elements[tag] = all;
  }
  const bool clipping = cx.settings.run.clip_norm.has_value();
  for (const auto& [tag, runs] : groups) {
    Finding f;
    f.kind = FindingKind::clip_spreads_nan;
    f.severity = clipping ? Severity::error : Severity::warning;
    f.tensor = "dQ/dK/dV";
    f.count = elements[tag];
    f.message = (clipping ? "" : "if clipped: ") + tag + " (" + cx.runs_text(runs) + ")";
    f.remedy = remedy_clip_spreads_nan();
    f.precision = cx.precision_text();
    f.modes = cx.mode_names(runs);
    out.push_back(f);
  }
}

}  // namespace

void add_gradient_findings(const AnalysisContext& cx, std::vector<Finding>& out) {
  const AttnParams& p = cx.in.params;
  const int64_t H = p.heads, Hk = p.kv_heads, Sq = p.seqlen_q, Sk = p.seqlen_k;
  const auto kind = FindingKind::nonfinite_gradient;
  add_nonfinite_findings(cx, kind, {"dQ", "head", "rows", H, Sq, p.head_dim, true, run_dq, prov_dq},
                         out);
  add_nonfinite_findings(
      cx, kind, {"dK", "kv head", "keys", Hk, Sk, p.head_dim, false, run_dk, prov_dk}, out);
  add_nonfinite_findings(
      cx, kind, {"dV", "kv head", "keys", Hk, Sk, p.head_dim_v, false, run_dv, prov_dv}, out);
  gradient_explosion(cx, out);
  clip_spreads_nan(cx, out);
}

}  // namespace attnscope
