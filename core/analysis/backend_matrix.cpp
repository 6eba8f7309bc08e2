// Runs every (variant, precision) of the registry on one case and judges it against fp64 with
// the accuracy rule: 2x (3x for gradients) the error of cpu-unfused at that precision plus the
// fp32 floor (fp32 rows at least 1e-5 relative, fp64 rows 1e-9 relative).
#include "core/analysis/backend_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "core/analysis/reference64.h"

namespace attnscope {
namespace {

constexpr const char* kOutputs[] = {"o", "lse", "dq", "dk", "dv"};

const std::vector<double>& output(const VariantOutputs& o, const std::string& name) {
  if (name == "o") return o.o;
  if (name == "lse") return o.lse;
  return name == "dq" ? o.dq : name == "dk" ? o.dk : o.dv;
}

const std::vector<double>& output(const Reference64& r, const std::string& name) {
  if (name == "o") return r.o;
  if (name == "lse") return r.lse;
  return name == "dq" ? r.dq : name == "dk" ? r.dk : r.dv;
}

// Accuracy-rule threshold of one output, or nothing when the baseline (cpu-unfused at the
// precision) cannot serve: fp64 rows 1e-9 relative; otherwise factor x max|baseline - fp64| +
// floor (factor 2, 3 for gradients), and for fp32 at least 1e-5 relative (DESIGN §3).
std::optional<double> threshold(Precision p, const std::string& name, const PairStats& s,
                                const std::vector<double>* baseline,
                                const std::vector<double>& ref) {
  if (p == Precision::f64) return 1e-9 * s.max_abs_ref + 1e-300;
  if (baseline == nullptr || baseline->size() != ref.size()) return std::nullopt;
  const PairStats base =
      compare_values(baseline->data(), ref.data(), static_cast<int64_t>(ref.size()));
  if (base.nonfinite_mismatch > 0) return std::nullopt;
  const double factor = name[0] == 'd' ? 3.0 : 2.0;
  const double rule = factor * base.max_error + accuracy_floor(s.max_abs_ref);
  return p == Precision::f32 ? std::max(rule, 1e-5 * s.max_abs_ref) : rule;
}

// "fp64 reference: mask fill safe, backward P saved, dropout keep-mask p = 0.1".
std::string oracle_text(const AttnParams& p) {
  std::string text = std::string("fp64 reference: mask fill ") + mask_fill_name(p.mask_fill) +
                     ", backward P " + backward_p_name(p.backward_p);
  if (p.dropout_keep != nullptr) {
    char prob[32];
    std::snprintf(prob, sizeof prob, "%g", p.dropout_p);
    text += std::string(", dropout keep-mask p = ") + prob;
  }
  return text;
}

MatrixRow judge(MatrixRow row, const VariantOutputs& out, const Reference64& ref,
                const VariantOutputs* baseline) {
  row.ran = true;
  for (const char* name : kOutputs) {
    const std::vector<double>& x = output(out, name);
    const std::vector<double>& r = output(ref, name);
    if (x.size() != r.size()) continue;  // a variant without that output
    TensorAccuracy t;
    t.tensor = name;
    t.stats = compare_values(x.data(), r.data(), static_cast<int64_t>(x.size()));
    const std::optional<double> limit =
        threshold(row.precision, name, t.stats, baseline ? &output(*baseline, name) : nullptr, r);
    t.rule_applied = limit.has_value();
    t.threshold = limit.value_or(0.0);
    t.within_rule = !limit || (t.stats.nonfinite_mismatch == 0 && t.stats.max_error <= *limit);
    row.finite = row.finite && t.stats.nonfinite == 0;
    row.within_rule = row.within_rule && t.within_rule;
    row.tensors.push_back(t);
  }
  return row;
}

}  // namespace

Result<BackendMatrix> backend_matrix(const CaseData& data, const MatrixSettings& settings) {
  RunChoice run = settings.run;
  run.precision = Precision::f64;
  Result<CaseInputs> made = make_case_inputs(data, run);
  if (!made) return made.error();
  const CaseInputs& in = *made;
  const AttnParams& p = in.params;
  if (p.group_size() * p.seqlen_q * p.seqlen_k > (int64_t{1} << 24)) {
    return make_error(ErrorCode::too_large,
                      data.info.path + ": the fp64 gradients of one kv group need " +
                          std::to_string(p.group_size() * p.seqlen_q * p.seqlen_k) +
                          " score entries (limit 2^24)",
                      "crop the case to fewer query / key positions for the backend matrix");
  }
  const Reference64 ref = compute_reference64(in, true, settings.threads);
  const VariantInputs inputs{in.q.data(), in.k.data(), in.v.data(),
                             in.has_dout ? in.dout.data() : nullptr};

  BackendMatrix m;
  m.rule =
      "max error <= 2x (3x for gradients) the error of cpu-unfused at the same precision "
      "+ fp32 floor (fp32: at least 1e-5 relative; fp64: 1e-9 relative); n/a where that "
      "baseline is non-finite";
  m.oracle = oracle_text(p);
  // cpu-unfused per low precision: the accuracy rule's baseline, run first and reused.
  std::map<Precision, Result<VariantOutputs>> unfused;
  if (const KernelVariant* base = find_variant("cpu-unfused")) {
    for (Precision prec : settings.precisions) {
      if (!base->supports(p, prec, Mode::unfused)) continue;
      RunConfig config;
      config.precision = prec;
      config.mode = Mode::unfused;
      config.threads = settings.threads;
      unfused.emplace(prec, run_variant(*base, p, config, inputs));
    }
  }
  const int64_t entries = p.batch * p.heads * p.seqlen_q * p.seqlen_k;
  for (const KernelVariant& v : kernel_variants()) {
    for (Precision prec : settings.precisions) {
      MatrixRow row;
      row.variant = v.name;
      row.backend = v.backend;
      row.semantics = v.semantics;
      row.precision = prec;
      row.mode = v.modes.empty() ? Mode::fused : v.modes.front();
      const Support s = v.supports(p, prec, row.mode);
      if (!s) {
        row.supported = false;
        row.reason = s.reason;
      } else if (v.backend == "reference" && entries > settings.materialise_budget) {
        row.supported = false;
        row.reason = "B*H*Sq*Sk = " + std::to_string(entries) +
                     " too large to materialise; the fp64 oracle is computed per kv group";
      }
      if (!row.supported) {
        m.rows.push_back(row);
        continue;
      }
      RunConfig config;
      config.precision = prec;
      config.mode = row.mode;
      config.threads = settings.threads;
      const auto base = unfused.find(prec);
      const bool cached = v.name == "cpu-unfused" && base != unfused.end();
      Result<VariantOutputs> out = cached ? base->second : run_variant(v, p, config, inputs);
      if (!out) {
        row.error = out.error().message;
        m.rows.push_back(row);
        continue;
      }
      const bool has_base = base != unfused.end() && base->second.ok();
      m.rows.push_back(judge(row, *out, ref, has_base ? &base->second.value() : nullptr));
    }
  }
  return m;
}

}  // namespace attnscope
