// `attnscope-cli scan FILE[::CASE] | RUN_FOLDER`: analyses every case (or one) with the
// instrumented CPU kernels and prints the findings as a table or, with --json, as the DESIGN §4
// document. A run folder's dumps are scanned rank after rank as one run (run_inputs.h).
// Cases are loaded lazily and analysed on --threads workers (a few at a time, so memory stays
// that of a few cases) and printed as they finish, in case order; Ctrl-C stops it early.
// --shard I/N scans one part of the run (shard.h; merge_command.cpp joins the parts);
// --follow then scans the cases a training run adds to the dump (dump_follower.h).
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "case_pipeline.h"
#include "cli_options.h"
#include "core/analysis/health.h"
#include "core/io/health_reader.h"
#include "core/io/run_folder.h"
#include "dump_follower.h"
#include "interrupt.h"
#include "scan_report.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "scan";

// --mode / --clip / --clip-scope on top of the shared run settings.
bool read_settings(const CommandArgs& args, AnalysisSettings& s) {
  if (!read_run_settings(args, kCommand, s.run)) return false;
  if (!read_mode_option(args, kCommand, false, s)) return false;
  if (const std::string* c = args.option("clip")) {
    s.run.clip_norm = parse_positive(*c);
    if (!s.run.clip_norm) return reject(kCommand, "bad --clip '" + *c + "'", "a positive max_norm");
  }
  if (const std::string* c = args.option("clip-scope")) {
    const std::optional<ClipScope> scope = clip_scope_named(*c);
    if (!scope) return reject(kCommand, "bad --clip-scope '" + *c + "'", "use case or kv-head");
    s.run.clip_scope = *scope;
  }
  if (const std::string* t = args.option("threads")) {
    const auto threads = parse_threads(*t);
    if (!threads) return reject(kCommand, "bad --threads '" + *t + "'", "a count from 1 to 1024");
    s.threads = *threads;
  }
  return true;
}

struct BatchOutcome {
  bool errors = false, unreadable = false, interrupted = false;
};

// What one scan covers: the cases, and those skipped (reported on stderr already).
struct ScanPlan {
  std::vector<ScanItem> items;
  std::vector<SkippedCase> skipped;
  size_t total = 0;  // cases of every shard
};

// Scans the plan's cases (workers and kernel threads split from settings.threads) and writes
// one report: a table, or one JSON document.
BatchOutcome scan_batch(const Inputs& inputs, const ScanPlan& plan, AnalysisSettings settings,
                        bool json, std::optional<Shard> shard) {
  const std::vector<ScanItem>& items = plan.items;
  const auto [workers, kernel_threads] = split_threads(settings.threads, items.size());
  settings.threads = kernel_threads;
  // One slot per case in flight: filled by a worker, printed and cleared in case order.
  struct Slot {
    std::optional<CaseAnalysis> analysis;
    std::string error, hint;
  };
  std::vector<Slot> slots(items.size());
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ScanReport> report =
      json ? make_json_report(std::cout, shard, inputs.split_by_dumps)
           : make_table_report(std::cout);
  const ReportHead head = report_head(inputs);
  report->begin(head, items);
  BatchOutcome result;
  // Each file stays open from its first case's load to its last case's report (one open per
  // file, however many cases; a run folder's files are not all open at once). A plan's items
  // are grouped by file.
  std::map<const InputDump*, std::shared_ptr<void>> open_files;
  std::mutex open_files_mutex;
  std::vector<SkippedCase> unloaded;  // cases whose tensors could not be read, in case order
  auto work = [&](size_t n) {
    Slot& slot = slots[n];
    const DumpReader& dump = items[n].input->reader;
    {
      const std::lock_guard<std::mutex> lock(open_files_mutex);
      if (!open_files.count(items[n].input)) open_files[items[n].input] = dump.keep_open();
    }
    Result<CaseData> data = dump.load(items[n].info->path);
    Result<CaseAnalysis> a =
        data ? analyze_case(*data, settings) : Result<CaseAnalysis>(data.error());
    if (a && a->interrupted) return false;  // cut short by Ctrl-C: not reported
    if (a) {
      slot.analysis = std::move(*a);
    } else {
      slot.error = case_error_text(dump.path(), items[n].info->path, a.error().message);
      slot.hint = a.error().hint;
    }
    return true;
  };
  auto emit = [&](size_t n) {
    if (n + 1 == items.size() || items[n + 1].input != items[n].input) {
      const std::lock_guard<std::mutex> lock(open_files_mutex);
      open_files.erase(items[n].input);
    }
    Slot slot = std::move(slots[n]);
    if (!slot.analysis) {
      fail(kCommand, slot.error, slot.hint);
      unloaded.push_back({item_path(items[n], inputs.folder), slot.error, slot.hint});
      result.unreadable = true;
      return;
    }
    result.errors = result.errors || has_error(slot.analysis->findings);
    report->add(items[n], *slot.analysis, settings);
  };
  PipelineOptions options;
  options.workers = workers;
  options.progress_label = kCommand;
  const PipelineOutcome outcome = run_in_order(items.size(), options, work, emit);
  ScanTotals totals;
  totals.scanned = outcome.emitted;
  totals.total = plan.total;
  totals.interrupted = outcome.interrupted;
  totals.skipped = plan.skipped;
  totals.skipped.insert(totals.skipped.end(), unloaded.begin(), unloaded.end());
  totals.world_size = run_world_size(head);
  totals.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report->end(totals);
  std::cout.flush();
  if (outcome.interrupted) {
    std::cerr << "attnscope-cli scan: interrupted after " << outcome.emitted << " of "
              << items.size() << " cases\n";
  }
  result.interrupted = outcome.interrupted;
  result.unreadable = result.unreadable || !plan.skipped.empty();
  return result;
}

// The cases `pattern` names in every dump, in order, and the skipped ones (printed); nullopt
// (after printing) when it names none, unless `following` a dump that has no case yet.
std::optional<ScanPlan> plan_scan(const Inputs& inputs, const std::string& pattern,
                                  bool following) {
  ScanPlan plan;
  for (const Inputs::Unopened& u : inputs.unopened) {
    plan.skipped.push_back({u.name, u.error.message, u.error.hint});
  }
  for (const InputDump& d : inputs.dumps) {
    for (const BrokenCase* b : report_broken(kCommand, d.reader, pattern)) {
      plan.skipped.push_back(
          {item_path({&d, &b->info}, inputs.folder), b->error.message, b->error.hint});
    }
    // Groups refused as cases (a batch-broadcast call, bad shapes) are listed, never dropped.
    for (const RejectedGroup& r : report_rejected(kCommand, d.reader, pattern)) {
      plan.skipped.push_back(
          {inputs.folder ? d.name + "::" + r.path : r.path, r.error->message, r.error->hint});
    }
    if (following && d.reader.cases().empty()) continue;
    if (!inputs.folder) {
      const auto cases = select_cases(kCommand, d.reader, pattern);
      if (!cases) return std::nullopt;
      for (const CaseInfo* c : *cases) plan.items.push_back({&d, c});
      continue;
    }
    for (const CaseInfo& c : d.reader.cases()) {
      if (pattern_names(pattern, c.path)) plan.items.push_back({&d, &c});
    }
  }
  if (plan.items.empty() && inputs.folder && !inputs.split_by_dumps) {
    fail(kCommand, inputs.path + ": no case of the run matches '" + pattern + "'",
         "attnscope-cli info " + inputs.path + " lists the run's cases");
    return std::nullopt;
  }
  plan.total = plan.items.size();
  return plan;
}

// --follow: the health warnings (core/analysis/health.h) of the dump's statistics not told
// yet, one line each ("health: KIND: TEXT"), on stdout (stderr under --json).
void report_health(const DumpReader& dump, std::set<std::string>& told, bool json) {
  if (dump.health_blocks() == kHealthUnreadable) {
    const Error e = dump.health_error().value_or(Error{});
    if (told.insert(e.message).second) {
      std::cerr << "attnscope-cli scan: the health statistics cannot be read: " << e.message
                << "\n";
    }
    return;
  }
  if (dump.health_blocks() == 0) return;
  Result<HealthTable> table = read_health_table(dump.path());
  if (!table) {
    if (told.insert(table.error().message).second) {
      std::cerr << "attnscope-cli scan: " << table.error().describe() << "\n";
    }
    return;
  }
  const HealthReport report = analyze_health(*table);
  for (const HealthWarning& w : report.warnings) {
    if (w.severity != "warning") continue;
    const std::string key = w.kind + " " + report.series[w.series].label();
    if (!told.insert(key).second) continue;
    (json ? std::cerr : std::cout) << "health: " << w.kind << ": " << w.text << std::endl;
  }
}

// --follow: after the first scan, each time the dump grew and settled (dump_follower.h) the
// cases not seen yet are scanned and reported (a table, or a JSON document, per batch) and the
// new health warnings printed, until Ctrl-C. The exit status covers every batch; Ctrl-C while
// waiting is the normal end.
int follow(const std::string& file, const std::string& pattern, bool allow_external,
           const AnalysisSettings& settings, bool json, std::set<std::string> seen,
           BatchOutcome total) {
  DumpFollower follower(file);
  if (!follower.ok()) return fail(kCommand, "cannot follow " + file + ": " + follower.error());
  std::cerr << "attnscope-cli scan: following " << file << " for new cases; Ctrl-C stops\n";
  std::set<std::string> told;  // health warnings printed
  if (std::optional<DumpReader> dump = open_dump(kCommand, file, allow_external)) {
    report_health(*dump, told, json);
  }
  while (follower.wait([] { return interrupt_requested(); })) {
    // A failed open (printed) is a step half-written: the next change brings it whole.
    std::optional<DumpReader> dump = open_dump(kCommand, file, allow_external);
    if (!dump) continue;
    report_health(*dump, told, json);
    Inputs inputs;
    inputs.path = file;
    inputs.dumps.push_back({std::move(*dump), file, std::nullopt});
    const InputDump& d = inputs.dumps.front();
    ScanPlan plan;
    for (const BrokenCase* b : report_broken(kCommand, d.reader, pattern, &seen)) {
      plan.skipped.push_back({b->info.path, b->error.message, b->error.hint});
    }
    for (const RejectedGroup& r : report_rejected(kCommand, d.reader, pattern, &seen)) {
      plan.skipped.push_back({r.path, r.error->message, r.error->hint});
    }
    for (const CaseInfo& c : d.reader.cases()) {
      if (pattern_names(pattern, c.path) && seen.insert(c.path).second) {
        plan.items.push_back({&d, &c});
      }
    }
    if (plan.items.empty() && plan.skipped.empty()) continue;
    plan.total = plan.items.size();
    const BatchOutcome batch = scan_batch(inputs, plan, settings, json, std::nullopt);
    total.errors = total.errors || batch.errors;
    total.unreadable = total.unreadable || batch.unreadable;
    if (batch.interrupted) return kExitInterrupted;
  }
  if (total.unreadable) return kExitUnreadable;
  return total.errors ? kExitFindings : kExitOk;
}

}  // namespace

int run_scan(const CommandArgs& args) {
  if (!check_options(args, kCommand,
                     {"case", "precision", "mode", "clip", "clip-scope", "mask-fill", "scale",
                      "threads", "follow", "shard"})) {
    return kExitUnreadable;
  }
  if (args.positional.size() != 1) {
    return fail(kCommand,
                "expected exactly one FILE or run folder (got " +
                    std::to_string(args.positional.size()) + ")",
                "attnscope-cli scan dump.h5 [--case /path], or scan RUN_FOLDER");
  }
  auto [file, case_path] = split_case_ref(args.positional[0]);
  if (const std::string* c = args.option("case")) case_path = *c;
  AnalysisSettings settings;
  if (!read_settings(args, settings)) return kExitUnreadable;
  std::optional<Shard> shard;
  if (const std::string* text = args.option("shard")) {
    shard = parse_shard(*text);
    if (!shard) {
      return fail(kCommand, "bad --shard '" + *text + "'",
                  "I/N: shard I (0 to N-1) of N, e.g. --shard 0/4 (or $SLURM_ARRAY_TASK_ID/N)");
    }
  }
  const bool following = args.flag("follow");
  if (following && (shard || is_directory(file))) {
    return fail(kCommand, "--follow takes one FILE, without --shard",
                "follow one rank's dump: attnscope-cli scan RUN/rank_00000.h5 --follow");
  }
  std::optional<Inputs> inputs = open_inputs(kCommand, file, args.allow_external, shard);
  if (!inputs) return kExitUnreadable;
  std::optional<ScanPlan> plan = plan_scan(*inputs, case_path, following);
  if (!plan) return kExitUnreadable;
  if (shard && !inputs->split_by_dumps) {
    plan->items = shard->part(plan->items);
    plan->skipped = shard->part(plan->skipped);
  }
  settings.cancelled = [] { return interrupt_requested(); };  // polled per kernel tile too
  install_interrupt_handler();
  const BatchOutcome first = scan_batch(*inputs, *plan, settings, args.json, shard);
  if (first.interrupted) return kExitInterrupted;
  if (following) {
    const DumpReader& dump = inputs->dumps.front().reader;
    std::set<std::string> seen;
    for (const CaseInfo& c : dump.cases()) seen.insert(c.path);
    for (const BrokenCase& b : dump.broken()) seen.insert(b.info.path);
    for (const SkippedCase& s : plan->skipped) seen.insert(s.path);  // rejected groups too
    inputs.reset();  // HDF5 shares an open file's cached metadata with a reopening: close it first
    return follow(file, case_path, args.allow_external, settings, args.json, std::move(seen),
                  first);
  }
  if (first.unreadable) return kExitUnreadable;
  return first.errors ? kExitFindings : kExitOk;
}

}  // namespace attnscope
