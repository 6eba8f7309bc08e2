// `attnscope-cli matrix FILE::CASE` (alias compare): the backend matrix
// (core/analysis/backend_matrix.h) as a table or JSON: the semantics each kernel variant runs,
// and per variant and precision finite-ness, max error and cosine vs fp64, the accuracy rule,
// and the reason for unsupported combinations.
#include <algorithm>
#include <iostream>

#include "case_format.h"
#include "cli_options.h"
#include "core/analysis/backend_matrix.h"
#include "core/analysis/finding_text.h"
#include "text_table.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "matrix";

std::string status(const MatrixRow& r) {
  if (!r.supported) return "unsupported: " + r.reason;
  if (!r.ran) return "failed: " + r.error;
  if (r.finite) return r.within_rule ? "ok" : "ok (outside rule)";
  std::string text = "NON-FINITE:";
  for (const TensorAccuracy& t : r.tensors) {
    if (t.stats.nonfinite > 0) text += " " + t.tensor + " " + count_text(t.stats.nonfinite);
  }
  return text;
}

const TensorAccuracy* tensor(const MatrixRow& r, const std::string& name) {
  for (const TensorAccuracy& t : r.tensors) {
    if (t.tensor == name) return &t;
  }
  return nullptr;
}

// "yes" / "NO" / "n/a" (no output's rule applies) / "-" (not run).
std::string rule_cell(const MatrixRow& r) {
  if (!r.ran) return "-";
  const bool applied = std::any_of(r.tensors.begin(), r.tensors.end(),
                                   [](const TensorAccuracy& t) { return t.rule_applied; });
  if (!applied) return "n/a";
  return r.within_rule ? "yes" : "NO";
}

// Worst max error and cosine over dq, dk, dv ("-" when not run).
std::pair<std::string, std::string> gradient_cells(const MatrixRow& r) {
  double err = 0, cos = 1;
  bool any = false;
  for (const char* name : {"dq", "dk", "dv"}) {
    if (const TensorAccuracy* t = tensor(r, name)) {
      any = true;
      err = std::max(err, t->stats.max_error);
      cos = std::min(cos, t->stats.cosine);
    }
  }
  if (!any) return {"-", "-"};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%.6f", cos);
  return {num(err), buf};
}

// Each variant's semantics once, in row order: "  torch-sdpa-math  SDPA MATH: ...".
void print_semantics(const BackendMatrix& m) {
  std::vector<const MatrixRow*> firsts;
  size_t width = 0;
  for (const MatrixRow& r : m.rows) {
    if (!firsts.empty() && firsts.back()->variant == r.variant) continue;
    firsts.push_back(&r);
    width = std::max(width, r.variant.size());
  }
  std::cout << "semantics:\n";
  for (const MatrixRow* r : firsts) {
    std::cout << "  " << r->variant << std::string(width - r->variant.size() + 2, ' ')
              << r->semantics << "\n";
  }
  std::cout << "\n";
}

void print_table(const std::string& where, const CaseData& data, const BackendMatrix& m) {
  std::cout << where << "  " << dims_text(data.info.dims)
            << ": outputs vs fp64\noracle: " << m.oracle << "\nrule: " << m.rule << "\n\n";
  print_semantics(m);
  TextTable table({"variant", "precision", "mode", "o err", "o cos", "lse err", "grad err",
                   "grad cos", "rule", "status"});
  for (const MatrixRow& r : m.rows) {
    std::vector<std::string> cells = {r.variant, precision_name(r.precision), mode_name(r.mode)};
    const TensorAccuracy* o = tensor(r, "o");
    const TensorAccuracy* lse = tensor(r, "lse");
    char cos[16] = "-";
    if (o) std::snprintf(cos, sizeof cos, "%.6f", o->stats.cosine);
    const auto [grad_err, grad_cos] = gradient_cells(r);
    cells.insert(cells.end(),
                 {o ? num(o->stats.max_error) : "-", cos, lse ? num(lse->stats.max_error) : "-",
                  grad_err, grad_cos, rule_cell(r), status(r)});
    table.add_row(cells);
  }
  table.print(std::cout);
}

void write_json(const std::string& file, const CaseData& data, const BackendMatrix& m) {
  JsonWriter json(std::cout);
  json.begin_object().field("file", file).field("case", data.info.path);
  write_case_shape(json, data.info.dims);
  json.field("rule", m.rule).field("oracle", m.oracle);
  json.key("rows").begin_array();
  for (const MatrixRow& r : m.rows) {
    json.begin_object();
    json.field("variant", r.variant).field("backend", r.backend);
    json.field("semantics", r.semantics);
    json.field("precision", precision_name(r.precision)).field("mode", mode_name(r.mode));
    json.field("supported", r.supported).field("reason", r.reason);
    json.field("ran", r.ran).field("error", r.error);
    json.field("finite", r.finite).field("within_rule", r.within_rule);
    json.key("tensors").begin_object();
    for (const TensorAccuracy& t : r.tensors) {
      json.key(t.tensor).begin_object();
      json.field("nonfinite", t.stats.nonfinite);
      json.field("nonfinite_mismatch", t.stats.nonfinite_mismatch);
      json.field("max_error", t.stats.max_error).field("cosine", t.stats.cosine);
      json.field("rel_l2", t.stats.rel_l2).field("norm_ratio", t.stats.norm_ratio);
      json.field("rule_applied", t.rule_applied).field("threshold", t.threshold);
      json.field("within_rule", t.within_rule);
      json.end_object();
    }
    json.end_object();
    json.end_object();
  }
  json.end_array().end_object();
}

}  // namespace

int run_matrix(const CommandArgs& args) {
  if (!check_options(args, kCommand, {"scale", "mask-fill"})) return kExitUnreadable;
  std::optional<LoadedCase> loaded = load_case_ref(args, kCommand);
  if (!loaded) return kExitUnreadable;
  MatrixSettings settings;
  if (!read_run_settings(args, kCommand, settings.run)) return kExitUnreadable;
  const CaseData& data = *loaded->data;
  const Result<BackendMatrix> m = backend_matrix(data, settings);
  if (!m) return fail(kCommand, m.error().message, m.error().hint);
  if (args.json) {
    write_json(loaded->dump->path(), data, *m);
  } else {
    print_table(loaded->dump->path() + "::" + data.info.path, data, *m);
  }
  const bool broken = std::any_of(m->rows.begin(), m->rows.end(), [](const MatrixRow& r) {
    return r.supported && (!r.ran || !r.finite);
  });
  return broken ? kExitFindings : kExitOk;
}

}  // namespace attnscope
