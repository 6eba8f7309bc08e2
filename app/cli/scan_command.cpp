// `attnscope-cli scan FILE[::CASE]`: analyses every case (or one) with the instrumented CPU
// kernels and prints the findings as a table or, with --json, as the DESIGN §4 document.
// Cases are analysed one at a time and streamed out, so memory stays that of one case.
#include <fnmatch.h>

#include <chrono>
#include <iostream>
#include <map>

#include "case_format.h"
#include "cli_options.h"
#include "core/analysis/finding_text.h"
#include "findings_json.h"
#include "text_table.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "scan";

// What the table keeps of an analysed case.
struct CaseSummary {
  std::string path, shape, precision;
  std::vector<Finding> findings;
  std::vector<std::string> clips;  // one line per clipped run
};

// "clip_grad_norm_(max_norm=1) on fused bf16: total 1.76e5 -> 1, coef 5.69e-6".
std::vector<std::string> clip_lines(const CaseAnalysis& a) {
  std::vector<std::string> lines;
  for (const ClipReport& c : a.clips) {
    std::string coefs;
    for (const ClipResult& r : c.clips) coefs += (coefs.empty() ? "" : ", ") + num(r.coef);
    lines.push_back("clip_grad_norm_(max_norm=" + num(c.max_norm) + ", " +
                    (c.scope == ClipScope::whole_case ? "whole case" : "per kv head") + ") on " +
                    mode_name(c.mode) + " " + precision_name(a.params.precision) + ": total " +
                    num(c.before.total) + " -> " + num(c.after.total) + ", coef " + coefs);
  }
  return lines;
}

std::string location(const Finding& f) {
  std::string out;
  auto add = [&](const std::string& part) {
    if (!part.empty()) out += (out.empty() ? "" : ", ") + part;
  };
  if (f.batch >= 0) add("batch " + std::to_string(f.batch));
  if (f.head >= 0) add("head " + std::to_string(f.head));
  add(range_text("heads", f.heads));
  add(range_text("rows", f.rows));
  add(range_text("cols", f.cols));
  return out.empty() ? "-" : out;
}

std::string kinds_text(const std::vector<Finding>& findings) {
  std::map<std::string, int> counts;
  std::vector<std::string> order;
  for (const Finding& f : findings) {
    if (f.severity == Severity::info) continue;
    const std::string k = finding_kind_name(f.kind);
    if (counts[k]++ == 0) order.push_back(k);
  }
  std::string out;
  for (const std::string& k : order) {
    out += (out.empty() ? "" : " ") + k + (counts[k] > 1 ? " x" + std::to_string(counts[k]) : "");
  }
  return out.empty() ? "-" : out;
}

void print_table(const std::string& file, const std::vector<CaseSummary>& cases, double seconds) {
  int64_t totals[3] = {0, 0, 0};
  TextTable table({"case", "shape", "precision", "errors", "warnings", "info", "kinds"});
  for (const CaseSummary& c : cases) {
    int64_t n[3];
    for (int s = 0; s < 3; ++s) {
      n[s] = count_severity(c.findings, static_cast<Severity>(s));
      totals[s] += n[s];
    }
    table.add_row({c.path, c.shape, c.precision, std::to_string(n[0]), std::to_string(n[1]),
                   std::to_string(n[2]), kinds_text(c.findings)});
  }
  char timing[64];
  std::snprintf(timing, sizeof timing, "%.2f s", seconds);
  std::cout << file << ": " << cases.size() << " case" << (cases.size() == 1 ? "" : "s")
            << " scanned in " << timing << ": " << totals[0] << " errors, " << totals[1]
            << " warnings, " << totals[2] << " info\n\n";
  table.print(std::cout);
  for (const CaseSummary& c : cases) {
    if (c.findings.empty() && c.clips.empty()) continue;
    std::cout << "\n" << c.path << "\n";
    for (const std::string& line : c.clips) std::cout << "  " << line << "\n";
    for (const Finding& f : c.findings) {
      std::cout << "  " << severity_name(f.severity) << "  " << finding_kind_name(f.kind) << "  "
                << f.tensor << "  " << location(f);
      if (!f.modes.empty()) std::cout << "  [" << modes_text(f.modes, f.precision) << "]";
      std::cout << "\n    " << f.message << "\n    remedy: " << f.remedy << "\n";
    }
  }
}

// --mode / --clip / --clip-scope on top of the shared run settings.
bool read_settings(const CommandArgs& args, AnalysisSettings& s) {
  if (!read_run_settings(args, kCommand, s.run)) return false;
  if (const std::string* m = args.option("mode")) {
    const auto modes = parse_modes(*m);
    if (!modes) return reject(kCommand, "bad --mode '" + *m + "'", "use fused, unfused or both");
    s.modes = *modes;
  }
  if (const std::string* c = args.option("clip")) {
    s.clip_norm = parse_positive(*c);
    if (!s.clip_norm) return reject(kCommand, "bad --clip '" + *c + "'", "a positive max_norm");
  }
  if (const std::string* c = args.option("clip-scope")) {
    if (*c != "case" && *c != "kv-head") {
      return reject(kCommand, "bad --clip-scope '" + *c + "'", "use case or kv-head");
    }
    s.clip_scope = *c == "case" ? ClipScope::whole_case : ClipScope::per_kv_head;
  }
  if (const std::string* t = args.option("threads")) {
    const auto threads = parse_threads(*t);
    if (!threads) return reject(kCommand, "bad --threads '" + *t + "'", "a count from 1 to 1024");
    s.threads = *threads;
  }
  return true;
}

// The cases `pattern` names: all when empty, the fnmatch matches when it holds a wildcard,
// else the one exact case; nullopt (after printing) when it names none.
std::optional<std::vector<std::string>> select_cases(const DumpReader& dump,
                                                     const std::string& pattern) {
  std::vector<std::string> paths;
  if (!pattern.empty() && pattern.find_first_of("*?[") == std::string::npos) {
    const std::optional<std::string> one = find_case(kCommand, dump, pattern);
    if (!one) return std::nullopt;
    return std::vector<std::string>{*one};
  }
  const std::string glob = pattern.empty() || pattern[0] == '/' ? pattern : "/" + pattern;
  for (const CaseInfo& c : dump.cases()) {
    if (glob.empty() || fnmatch(glob.c_str(), c.path.c_str(), 0) == 0) paths.push_back(c.path);
  }
  if (paths.empty()) {
    fail(kCommand, dump.path() + ": no case matches '" + pattern + "'",
         "attnscope-cli info " + dump.path() + " lists the cases");
    return std::nullopt;
  }
  return paths;
}

}  // namespace

int run_scan(const CommandArgs& args) {
  if (!check_options(
          args, kCommand,
          {"case", "precision", "mode", "clip", "clip-scope", "mask-fill", "scale", "threads"})) {
    return kExitUnreadable;
  }
  if (args.positional.size() != 1) {
    return fail(kCommand,
                "expected exactly one FILE (got " + std::to_string(args.positional.size()) + ")",
                "attnscope-cli scan dump.h5 [--case /path]");
  }
  auto [file, case_path] = split_case_ref(args.positional[0]);
  if (const std::string* c = args.option("case")) case_path = *c;
  AnalysisSettings settings;
  if (!read_settings(args, settings)) return kExitUnreadable;
  std::optional<DumpReader> dump = open_dump(kCommand, file, args.allow_external);
  if (!dump) return kExitUnreadable;

  const std::optional<std::vector<std::string>> paths = select_cases(*dump, case_path);
  if (!paths) return kExitUnreadable;
  const auto start = std::chrono::steady_clock::now();
  JsonWriter json(std::cout);
  if (args.json) json.begin_object().field("file", dump->path()).key("cases").begin_array();
  std::vector<CaseSummary> summaries;
  bool errors = false, unreadable = false;
  for (const std::string& path : *paths) {
    std::optional<CaseData> data = load_case(kCommand, *dump, path);
    if (!data) {
      unreadable = true;
      continue;
    }
    const Result<CaseAnalysis> a = analyze_case(*data, settings);
    if (!a) {
      fail(kCommand, dump->path() + "::" + path + ": " + a.error().message, a.error().hint);
      unreadable = true;
      continue;
    }
    errors = errors || has_error(a->findings);
    if (args.json) {
      write_case_analysis(json, data->info, *a, settings);
    } else {
      summaries.push_back({path, dims_text(data->info.dims), precision_name(a->params.precision),
                           a->findings, clip_lines(*a)});
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (args.json) {
    json.end_array().field("seconds", seconds).end_object();
  } else {
    print_table(dump->path(), summaries, seconds);
  }
  if (unreadable) return kExitUnreadable;
  return errors ? kExitFindings : kExitOk;
}

}  // namespace attnscope
