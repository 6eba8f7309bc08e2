// `attnscope-cli health DUMP|RUN_FOLDER`: the recorder's attention health statistics over the
// run's steps (core/analysis/health.h): warnings before the NaN with their predicted step, the
// first non-finite step, and each head's headroom to its score limit; a table or --json.
#include <cmath>
#include <iostream>

#include "cli_common.h"
#include "cli_options.h"
#include "core/analysis/health.h"
#include "core/io/health_reader.h"
#include "core/io/run_folder.h"
#include "json_writer.h"

namespace attnscope {
namespace {

void print_text(const HealthReport& r) {
  for (const std::string& f : r.files) std::cout << f << "\n";
  std::cout << "health statistics: " << r.calls << " calls, steps " << r.first_step << " to "
            << r.last_step << ", " << r.series.size() << " heads (layer x head)\n";
  if (r.first_nonfinite) {
    const HealthSeries& s = r.series[r.first_nonfinite->series];
    std::cout << "first non-finite: step " << r.first_nonfinite->step << ", " << s.label() << " ("
              << r.first_nonfinite->count << " NaN / Inf values)";
    if (r.first_nonfinite->failed_series.size() > 1) {
      std::cout << "; heads of that layer failing there:";
      for (size_t k : r.first_nonfinite->failed_series) std::cout << " " << r.series[k].head;
    }
    std::cout << "\n";
  }
  std::cout << "\n";
  for (const char* severity : {"warning", "notice"}) {
    size_t n = 0;
    for (const HealthWarning& w : r.warnings) n += w.severity == severity;
    std::cout << (n == 0 ? "no" : std::to_string(n)) << " " << severity << (n == 1 ? "" : "s")
              << (std::string(severity) == "warning"
                      ? " (horizon " + std::to_string(r.horizon) + " steps)"
                      : std::string())
              << (n > 0 ? ":" : "") << "\n";
    for (const HealthWarning& w : r.warnings) {
      if (w.severity != severity) continue;
      std::cout << "  " << w.kind << (w.within_horizon ? " [failure predicted]" : "") << ": "
                << w.text << "\n";
      for (const std::string& remedy : w.remedies) std::cout << "      - " << remedy << "\n";
    }
  }
  std::cout << "\nheadroom at the last step, log10(limit / max |logit|):\n";
  int64_t layer = -1;
  int rank = -2;
  for (const HealthSeries& s : r.series) {
    if (s.layer != layer || s.rank != rank) {
      if (layer >= 0) std::cout << "\n";
      std::cout << "  " << (s.rank >= 0 ? "rank " + std::to_string(s.rank) + " " : "") << "layer "
                << s.layer << " (" << s.limit_text << "):";
      layer = s.layer;
      rank = s.rank;
    }
    char cell[32];
    std::snprintf(cell, sizeof cell, " h%lld %.2f", static_cast<long long>(s.head),
                  s.steps.empty() ? NAN : s.headroom(s.steps.size() - 1));
    std::cout << cell;
  }
  std::cout << "\n";
}

void write_optional(JsonWriter& j, const char* key, const std::optional<int64_t>& v) {
  j.key(key);
  if (v) {
    j.value(*v);
  } else {
    j.null();
  }
}

void print_json(const HealthReport& r) {
  JsonWriter j(std::cout);
  j.begin_object();
  j.field("files", r.files);
  j.field("calls", static_cast<int64_t>(r.calls));
  j.field("first_step", r.first_step).field("last_step", r.last_step);
  j.field("horizon", r.horizon);
  j.field("predicts_failure", r.predicts_failure());
  j.key("first_nonfinite");
  if (r.first_nonfinite) {
    j.begin_object()
        .field("step", r.first_nonfinite->step)
        .field("series", static_cast<int64_t>(r.first_nonfinite->series))
        .field("count", r.first_nonfinite->count);
    std::vector<int64_t> failed(r.first_nonfinite->failed_series.begin(),
                                r.first_nonfinite->failed_series.end());
    j.field("failed_series", failed).end_object();
  } else {
    j.null();
  }
  j.key("warnings").begin_array();
  for (const HealthWarning& w : r.warnings) {
    const HealthSeries& s = r.series[w.series];
    j.begin_object().field("kind", w.kind).field("severity", w.severity);
    j.field("series", static_cast<int64_t>(w.series));
    j.field("layer", s.layer).field("name", s.name).field("head", s.head);
    j.field("rank", static_cast<int64_t>(s.rank));
    j.field("first_step", w.first_step).field("step", w.step).field("value", w.value);
    write_optional(j, "predicted_step", w.predicted_step);
    write_optional(j, "band_low", w.band_low);
    write_optional(j, "band_high", w.band_high);
    write_optional(j, "predicted_at_first", w.predicted_at_first);
    j.field("crossed", w.crossed).field("within_horizon", w.within_horizon);
    j.key("trend");
    if (w.trend) {
      j.begin_object()
          .field("model", w.trend->model_text())
          .field("a", w.trend->a)
          .field("b", w.trend->b)
          .field("from_step", w.trend->from_step)
          .field("to_step", w.trend->to_step)
          .field("sigma", w.trend->sigma)
          .end_object();
    } else {
      j.null();
    }
    j.field("text", w.text).field("remedies", w.remedies).end_object();
  }
  j.end_array();
  j.key("series").begin_array();
  for (const HealthSeries& s : r.series) {
    j.begin_object().field("layer", s.layer).field("name", s.name).field("head", s.head);
    j.field("rank", static_cast<int64_t>(s.rank));
    j.field("limit", s.limit).field("limit_text", s.limit_text).field("steps", s.steps);
    for (int k = 0; k < kHealthStats; ++k) {
      std::vector<double> column;
      for (size_t i = 0; i < s.steps.size(); ++i) column.push_back(s.values[i][k]);
      j.field(health_stat_name(static_cast<HealthStat>(k)), column);
    }
    j.end_object();
  }
  j.end_array();
  j.end_object();
  std::cout << "\n";
}

}  // namespace

int run_health(const CommandArgs& args) {
  const std::string command = "health";
  if (!check_options(args, command, {"horizon"})) return kExitUnreadable;
  if (args.positional.size() != 1) {
    return fail(command, "expected one DUMP or RUN_FOLDER", "attnscope-cli health --help");
  }
  const std::string& path = args.positional[0];
  HealthOptions options;
  if (const std::string* horizon = args.option("horizon")) {
    const std::optional<double> steps = parse_positive(*horizon);
    if (!steps || *steps > 1e12) {
      return fail(command, "bad --horizon '" + *horizon + "'",
                  "a number of steps > 0, e.g. --horizon 2000");
    }
    options.horizon = static_cast<int64_t>(*steps);
  }
  // Each file is read by the probe first: libhdf5 faulting on hostile metadata stays there.
  std::vector<std::string> files = {path};
  if (is_directory(path)) {
    Result<RunFolderListing> listing = list_run_dumps(path);
    if (!listing) return fail(command, listing.error().message, listing.error().hint);
    files = listing->dumps;
  }
  for (const std::string& file : files) {
    Result<DumpReader> dump = try_open_dump(file, args.allow_external);
    if (!dump) return fail(command, dump.error().message, dump.error().hint);
    if (dump->health_blocks() == kHealthUnreadable) {
      const Error& e = dump->health_error().value_or(Error{});
      return fail(command, file + ": its health statistics cannot be read: " + e.message, e.hint);
    }
  }
  Result<HealthTable> table = read_health_table(path);
  if (!table) return fail(command, table.error().message, table.error().hint);
  if (table->empty()) {
    return fail(command, path + ": holds no health statistics (/health)",
                "record with attnscope_record.Recorder(..., stats=True) (on by default with "
                "when=\"nonfinite\"), attnscope_record 0.2 or later");
  }
  const HealthReport report = analyze_health(*table, options);
  if (args.json) {
    print_json(report);
  } else {
    print_text(report);
  }
  return report.predicts_failure() ? kExitFindings : kExitOk;
}

}  // namespace attnscope
