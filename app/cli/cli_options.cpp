// Parsing of option values and the loading of dumps / cases for the analysis commands.
#include "cli_options.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "core/io/dump_probe.h"

namespace attnscope {

std::optional<Precision> parse_precision_option(const std::string& text) {
  if (text == "fp16" || text == "float16") return Precision::f16;
  if (text == "bf16" || text == "bfloat16") return Precision::bf16;
  if (text == "fp32" || text == "float32") return Precision::f32;
  return std::nullopt;
}

std::optional<std::vector<Mode>> parse_modes(const std::string& text) {
  if (text == "recorded") return std::vector<Mode>{};
  if (text == "fused" || text == "upcast") return std::vector<Mode>{Mode::fused};
  if (text == "unfused") return std::vector<Mode>{Mode::unfused};
  if (text == "both") return std::vector<Mode>{Mode::fused, Mode::unfused};
  return std::nullopt;
}

std::optional<MaskFill> parse_mask_fill(const std::string& text) {
  if (text == "neg_inf" || text == "-inf" || text == "inf") return MaskFill::neg_inf;
  if (text == "-1e9" || text == "neg_1e9" || text == "1e9") return MaskFill::neg_1e9;
  if (text == "finfo_min" || text == "min") return MaskFill::finfo_min;
  if (text == "safe") return MaskFill::safe;
  return std::nullopt;
}

std::optional<double> parse_positive(const std::string& text) {
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(x) || x <= 0) return std::nullopt;
  return x;
}

std::optional<ScaleRange> parse_scales(const std::string& text) {
  const size_t a = text.find(':'), b = text.find(':', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos) return std::nullopt;
  const auto lo = parse_positive(text.substr(0, a)),
             hi = parse_positive(text.substr(a + 1, b - a - 1));
  const auto n = parse_positive(text.substr(b + 1));
  if (!lo || !hi || !n || *hi < *lo || *n != std::floor(*n) || *n > 1000) return std::nullopt;
  return ScaleRange{*lo, *hi, static_cast<int>(*n)};
}

std::pair<std::string, std::string> split_case_ref(const std::string& text) {
  const size_t sep = text.rfind("::");
  if (sep == std::string::npos) return {text, ""};
  return {text.substr(0, sep), text.substr(sep + 2)};
}

int fail(const std::string& command, const std::string& message, const std::string& hint) {
  std::cerr << "attnscope-cli " << command << ": " << message << "\n";
  if (!hint.empty()) std::cerr << "  hint: " << hint << "\n";
  return kExitUnreadable;
}

Result<DumpReader> try_open_dump(const std::string& file, bool allow_external) {
  ProbeOptions probe;  // a crash or hang of HDF5 on a hostile file stays in the probe process
  probe.allow_external = allow_external;
  OpenOptions options;
  options.allow_external = allow_external;
  return open_untrusted_dump(file, probe, options);
}

std::optional<DumpReader> open_dump(const std::string& command, const std::string& file,
                                    bool allow_external) {
  Result<DumpReader> dump = try_open_dump(file, allow_external);
  if (!dump) {
    fail(command, dump.error().message, dump.error().hint);
    return std::nullopt;
  }
  return std::move(*dump);
}

bool pattern_names(const std::string& pattern, const std::string& path) {
  if (pattern.empty()) return true;
  const std::string glob = pattern[0] == '/' ? pattern : "/" + pattern;
  if (glob.find_first_of("*?[") == std::string::npos) return glob == path;
  return fnmatch(glob.c_str(), path.c_str(), 0) == 0;
}

std::vector<const BrokenCase*> report_broken(const std::string& command, const DumpReader& dump,
                                             const std::string& pattern,
                                             std::set<std::string>* seen) {
  std::vector<const BrokenCase*> reported;
  for (const BrokenCase& b : dump.broken()) {
    if (!pattern_names(pattern, b.info.path)) continue;
    if (seen != nullptr && !seen->insert(b.info.path).second) continue;
    fail(command, "skipped " + b.info.path + ", its data cannot be read: " + b.error.message,
         b.error.hint);
    reported.push_back(&b);
  }
  return reported;
}

std::vector<RejectedGroup> report_rejected(const std::string& command, const DumpReader& dump,
                                           const std::string& pattern,
                                           std::set<std::string>* seen) {
  std::vector<RejectedGroup> reported;
  const std::string prefix = dump.path() + ": ";
  for (const Error& e : dump.rejected()) {
    // "FILE: /group/key: problem" -> "/group/key".
    std::string path = dump.path();
    if (e.message.rfind(prefix + "/", 0) == 0) {
      const size_t end = e.message.find(": ", prefix.size());
      path = e.message.substr(prefix.size(),
                              end == std::string::npos ? std::string::npos : end - prefix.size());
    }
    // Named when the pattern names the path or a group above it ("/a/b/k", "/a/b", "/a").
    bool named = pattern.empty();
    for (size_t end = path.size(); !named && end > 0 && end != std::string::npos;
         end = path.rfind('/', end - 1)) {
      named = pattern_names(pattern, path.substr(0, end));
    }
    if (!named || (seen != nullptr && !seen->insert(path).second)) continue;
    fail(command, "skipped " + path + ", it cannot be read as a case: " + e.message, e.hint);
    reported.push_back({path, &e});
  }
  return reported;
}

std::string case_error_text(const std::string& file, const std::string& case_path,
                            const std::string& message) {
  if (message.rfind(file + ": ", 0) == 0) return message;
  return file + "::" + case_path + ": " + message;
}

bool reject(const std::string& command, const std::string& message, const std::string& hint) {
  fail(command, message, hint);
  return false;
}

std::optional<std::string> find_case(const std::string& command, const DumpReader& dump,
                                     const std::string& case_path) {
  const std::string wanted = case_path.empty() || case_path[0] == '/' ? case_path : "/" + case_path;
  for (const BrokenCase& b : dump.broken()) {
    if (b.info.path == wanted) {
      fail(command, b.error.message, b.error.hint);
      return std::nullopt;
    }
  }
  std::string listing;
  for (const CaseInfo& c : dump.cases()) {
    if (c.path == wanted) return wanted;
    if (listing.size() < 300) listing += (listing.empty() ? "" : ", ") + c.path;
  }
  fail(command, dump.path() + ": no case '" + case_path + "'",
       "cases in this file: " + listing + (listing.size() >= 300 ? ", ..." : "") +
           " (attnscope-cli info " + dump.path() + " lists them all)");
  return std::nullopt;
}

std::optional<CaseData> load_case(const std::string& command, const DumpReader& dump,
                                  const std::string& case_path) {
  const std::optional<std::string> path = find_case(command, dump, case_path);
  if (!path) return std::nullopt;
  Result<CaseData> data = dump.load(*path);
  if (!data) {
    fail(command, case_error_text(dump.path(), *path, data.error().message), data.error().hint);
    return std::nullopt;
  }
  return std::move(*data);
}

std::optional<std::vector<const CaseInfo*>> select_cases(const std::string& command,
                                                         const DumpReader& dump,
                                                         const std::string& pattern) {
  std::vector<const CaseInfo*> paths;
  if (!pattern.empty() && pattern.find_first_of("*?[") == std::string::npos) {
    const std::optional<std::string> one = find_case(command, dump, pattern);
    if (!one) return std::nullopt;
    for (const CaseInfo& c : dump.cases()) {
      if (c.path == *one) return std::vector<const CaseInfo*>{&c};
    }
  }
  const std::string glob = pattern.empty() || pattern[0] == '/' ? pattern : "/" + pattern;
  for (const CaseInfo& c : dump.cases()) {
    if (glob.empty() || fnmatch(glob.c_str(), c.path.c_str(), 0) == 0) paths.push_back(&c);
  }
  if (dump.cases().empty()) {  // a recording whose steps all stayed finite
    fail(command,
         dump.path() + ": no case, only attention health statistics (" +
             std::to_string(dump.health_blocks()) + " blocks)",
         "attnscope-cli health " + dump.path() +
             " shows them; under when=\"nonfinite\" the "
             "recorder writes a step's tensors once one of its calls goes non-finite");
    return std::nullopt;
  }
  if (paths.empty()) {
    fail(command, dump.path() + ": no case matches '" + pattern + "'",
         "attnscope-cli info " + dump.path() + " lists the cases");
    return std::nullopt;
  }
  return paths;
}

bool read_run_settings(const CommandArgs& args, const std::string& command, RunChoice& run) {
  if (const std::string* p = args.option("precision"); p && *p != "recorded") {
    run.precision = parse_precision_option(*p);
    if (!run.precision)
      return reject(command, "bad --precision '" + *p + "'", "use fp32, fp16, bf16 or recorded");
  }
  if (const std::string* s = args.option("scale")) {
    run.scale = parse_positive(*s);
    if (!run.scale) return reject(command, "bad --scale '" + *s + "'", "a positive number");
  }
  if (const std::string* f = args.option("mask-fill"); f && *f != "recorded") {
    const auto fill = parse_mask_fill(*f);
    if (!fill)
      return reject(command, "bad --mask-fill '" + *f + "'",
                    "use recorded, inf, 1e9, min or safe (or neg_inf, -1e9, finfo_min)");
    run.mask_fill = *fill;
  }
  return true;
}

bool read_mode_option(const CommandArgs& args, const std::string& command, bool one_mode,
                      AnalysisSettings& s) {
  const std::string* m = args.option("mode");
  if (m == nullptr) return true;
  const auto modes = parse_modes(*m);
  if (!modes || (one_mode && *m == "both")) {
    return reject(command, "bad --mode '" + *m + "'",
                  one_mode ? "use recorded, fused, unfused or upcast"
                           : "use recorded, fused, unfused, upcast or both");
  }
  s.run.modes = *modes;
  s.run.upcast = *m == "upcast";
  return true;
}

std::optional<int> parse_threads(const std::string& text) {
  const auto n = parse_positive(text);
  if (!n || *n != std::floor(*n) || *n > 1024) return std::nullopt;
  return static_cast<int>(*n);
}

std::optional<LoadedCase> load_case_ref(const CommandArgs& args, const std::string& command) {
  if (args.positional.size() != 1) {
    fail(command,
         "expected exactly one FILE::CASE (got " + std::to_string(args.positional.size()) + ")",
         "e.g. attnscope-cli " + command + " dump.h5::/step_000120/layer_07");
    return std::nullopt;
  }
  const auto [file, case_path] = split_case_ref(args.positional[0]);
  if (case_path.empty()) {
    fail(command, "'" + args.positional[0] + "' names no case",
         "write FILE::CASE, e.g. " + file + "::/fp16_score_overflow");
    return std::nullopt;
  }
  LoadedCase loaded;
  loaded.dump = open_dump(command, file, args.allow_external);
  if (!loaded.dump) return std::nullopt;
  loaded.data = load_case(command, *loaded.dump, case_path);
  if (!loaded.data) return std::nullopt;
  return loaded;
}

std::optional<int64_t> read_index(const CommandArgs& args, const std::string& command,
                                  const char* name, int64_t size) {
  const std::string* text = args.option(name);
  if (text == nullptr) return 0;
  char* end = nullptr;
  const long long n = std::strtoll(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || n < 0 || n >= size) {
    reject(command, std::string("bad --") + name + " '" + *text + "'",
           "an index from 0 to " + std::to_string(size - 1));
    return std::nullopt;
  }
  return n;
}

}  // namespace attnscope
