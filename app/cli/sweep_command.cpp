// `attnscope-cli sweep FILE::CASE`: softmax-scale sweep (core/analysis/scale_sweep.h) as a
// table or JSON: per (precision, mode) the finite scale range and where the case turns
// non-finite, and per scale the non-finite count and max |S| of every series. Ctrl-C stops it
// between two runs (exit 130, nothing on stdout).
#include <algorithm>
#include <iostream>

#include "cli_options.h"
#include "core/analysis/finding_text.h"
#include "core/analysis/scale_sweep.h"
#include "interrupt.h"
#include "json_writer.h"
#include "text_table.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "sweep";

std::string series_name(Precision p, Mode m) {
  return std::string(precision_name(p)) + " " + mode_name(m);
}

void print_table(const std::string& where, const ScaleSweep& s) {
  std::cout << where << ": softmax scale " << num(s.scales.front()) << " .. "
            << num(s.scales.back()) << " (" << s.scales.size() << " log-spaced points), case scale "
            << num(s.case_scale) << "\n\n";
  TextTable ranges({"series", "finite scales", "non-finite from", "case scale"});
  for (const SafeRange& r : s.ranges) {
    ranges.add_row({series_name(r.precision, r.mode),
                    r.any_finite ? num(r.low) + " .. " + num(r.high) : "none",
                    r.threshold ? num(*r.threshold) : "-",
                    r.case_scale_finite ? "finite" : "NON-FINITE"});
  }
  ranges.print(std::cout);
  std::cout << "\nper scale: max |S| when finite, else the count of non-finite outputs\n\n";
  std::vector<std::string> headers = {"scale"};
  for (const SafeRange& r : s.ranges) headers.push_back(series_name(r.precision, r.mode));
  TextTable grid(headers);
  const size_t per_scale = s.ranges.size();
  for (size_t n = 0; n < s.scales.size(); ++n) {
    std::vector<std::string> row = {num(s.scales[n])};
    for (size_t k = 0; k < per_scale; ++k) {
      const SweepPoint& p = s.points[n * per_scale + k];
      row.push_back(p.finite()
                        ? num(p.max_abs_s)
                        : "x" + count_text(p.nonfinite_o + p.nonfinite_lse + p.nonfinite_grad));
    }
    grid.add_row(row);
  }
  grid.print(std::cout);
}

void write_json(const std::string& file, const std::string& path, const ScaleSweep& s) {
  JsonWriter json(std::cout);
  json.begin_object().field("file", file).field("case", path);
  json.field("case_scale", s.case_scale).field("scales", s.scales);
  json.key("series").begin_array();
  const size_t per_scale = s.ranges.size();
  for (size_t k = 0; k < per_scale; ++k) {
    const SafeRange& r = s.ranges[k];
    json.begin_object();
    json.field("precision", precision_name(r.precision)).field("mode", mode_name(r.mode));
    json.field("any_finite", r.any_finite);
    json.key("safe_range");
    if (r.any_finite)
      json.value(std::vector<double>{r.low, r.high});
    else
      json.null();
    json.key("threshold");
    if (r.threshold)
      json.value(*r.threshold);
    else
      json.null();
    json.field("case_scale_finite", r.case_scale_finite);
    json.key("points").begin_array();
    for (size_t n = k; n < s.points.size(); n += per_scale) {
      const SweepPoint& p = s.points[n];
      json.begin_object().field("scale", p.scale).field("finite", p.finite());
      json.field("nonfinite_o", p.nonfinite_o).field("nonfinite_lse", p.nonfinite_lse);
      json.field("nonfinite_grad", p.nonfinite_grad).field("max_abs_s", p.max_abs_s);
      json.end_object();
    }
    json.end_array().end_object();
  }
  json.end_array().end_object();
}

bool read_settings(const CommandArgs& args, SweepSettings& s) {
  RunChoice run;
  if (!read_run_settings(args, kCommand, run)) return false;
  s.run.mask_fill = run.mask_fill;
  if (run.precision) s.precisions = {*run.precision};
  if (const std::string* m = args.option("mode")) {
    const auto modes = parse_modes(*m);
    if (!modes) return reject(kCommand, "bad --mode '" + *m + "'", "use fused, unfused or both");
    s.modes = *modes;
  }
  if (const std::string* text = args.option("scales")) {
    const auto range = parse_scales(*text);
    if (!range)
      return reject(kCommand, "bad --scales '" + *text + "'", "MIN:MAX:N, e.g. 0.01:10:25");
    s.scale_min = range->min;
    s.scale_max = range->max;
    s.points = range->points;
  }
  s.backward = !args.flag("forward-only");
  return true;
}

}  // namespace

int run_sweep(const CommandArgs& args) {
  if (!check_options(args, kCommand,
                     {"scales", "precision", "mode", "mask-fill", "forward-only"})) {
    return kExitUnreadable;
  }
  std::optional<LoadedCase> loaded = load_case_ref(args, kCommand);
  if (!loaded) return kExitUnreadable;
  SweepSettings settings;
  if (!read_settings(args, settings)) return kExitUnreadable;
  settings.stop = &interrupt_flag();
  install_interrupt_handler();
  const Result<ScaleSweep> s = scale_sweep(*loaded->data, settings);
  if (!s) return fail(kCommand, s.error().message, s.error().hint);
  if (s->interrupted) {
    const size_t planned = s->scales.size() * settings.precisions.size() * settings.modes.size();
    std::cerr << "attnscope-cli sweep: interrupted after " << std::min(s->points.size(), planned)
              << " of " << planned << " scale points (plus bisection runs); nothing printed\n";
    return kExitInterrupted;
  }
  const std::string path = loaded->data->info.path;
  if (args.json) {
    write_json(loaded->dump->path(), path, *s);
  } else {
    print_table(loaded->dump->path() + "::" + path, *s);
  }
  const bool broken = std::any_of(s->ranges.begin(), s->ranges.end(),
                                  [](const SafeRange& r) { return !r.case_scale_finite; });
  return broken ? kExitFindings : kExitOk;
}

}  // namespace attnscope
