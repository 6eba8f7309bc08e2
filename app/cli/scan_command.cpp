// `attnscope-cli scan FILE[::CASE]`: analyses every case (or one) with the instrumented CPU
// kernels and prints the findings as a table or, with --json, as the DESIGN §4 document.
// Cases are loaded lazily and analysed on --threads workers (a few at a time, so memory stays
// that of a few cases) and printed as they finish, in case order; Ctrl-C stops it early.
// --follow then scans the cases a training run adds to the dump (dump_follower.h).
#include <chrono>
#include <iostream>
#include <memory>
#include <set>

#include "case_pipeline.h"
#include "cli_options.h"
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
    s.clip_norm = parse_positive(*c);
    if (!s.clip_norm) return reject(kCommand, "bad --clip '" + *c + "'", "a positive max_norm");
  }
  if (const std::string* c = args.option("clip-scope")) {
    const std::optional<ClipScope> scope = clip_scope_named(*c);
    if (!scope) return reject(kCommand, "bad --clip-scope '" + *c + "'", "use case or kv-head");
    s.clip_scope = *scope;
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

// Scans `cases` of `dump` (workers and kernel threads split from settings.threads) and writes
// one report: a table, or one JSON document.
BatchOutcome scan_batch(const DumpReader& dump, const std::vector<const CaseInfo*>& cases,
                        const std::vector<const BrokenCase*>& broken, AnalysisSettings settings,
                        bool json) {
  const auto [workers, kernel_threads] = split_threads(settings.threads, cases.size());
  settings.threads = kernel_threads;
  // One slot per case in flight: filled by a worker, printed and cleared in case order.
  struct Slot {
    std::optional<CaseAnalysis> analysis;
    std::string error, hint;
  };
  std::vector<Slot> slots(cases.size());
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<ScanReport> report =
      json ? make_json_report(std::cout) : make_table_report(std::cout);
  report->begin(dump.path(), cases);
  BatchOutcome result;
  auto work = [&](size_t n) {
    Slot& slot = slots[n];
    Result<CaseData> data = dump.load(cases[n]->path);
    Result<CaseAnalysis> a =
        data ? analyze_case(*data, settings) : Result<CaseAnalysis>(data.error());
    if (a && a->interrupted) return false;  // cut short by Ctrl-C: not reported
    if (a) {
      slot.analysis = std::move(*a);
    } else {
      slot.error = case_error_text(dump.path(), cases[n]->path, a.error().message);
      slot.hint = a.error().hint;
    }
    return true;
  };
  auto emit = [&](size_t n) {
    Slot slot = std::move(slots[n]);
    if (!slot.analysis) {
      fail(kCommand, slot.error, slot.hint);
      result.unreadable = true;
      return;
    }
    result.errors = result.errors || has_error(slot.analysis->findings);
    report->add(*cases[n], *slot.analysis, settings);
  };
  PipelineOptions options;
  options.workers = workers;
  options.progress_label = kCommand;
  const PipelineOutcome outcome = run_in_order(cases.size(), options, work, emit);
  ScanTotals totals;
  totals.scanned = outcome.emitted;
  totals.total = cases.size();
  totals.interrupted = outcome.interrupted;
  totals.broken = broken;
  totals.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report->end(totals);
  std::cout.flush();
  if (outcome.interrupted) {
    std::cerr << "attnscope-cli scan: interrupted after " << outcome.emitted << " of "
              << cases.size() << " cases\n";
  }
  result.interrupted = outcome.interrupted;
  result.unreadable = result.unreadable || !broken.empty();
  return result;
}

// --follow: after the first scan, each time the dump grew and settled (dump_follower.h) the
// cases not seen yet are scanned and reported (a table, or a JSON document, per batch) until
// Ctrl-C. The exit status covers every batch; Ctrl-C while waiting is the normal end.
int follow(const std::string& file, const std::string& pattern, bool allow_external,
           const AnalysisSettings& settings, bool json, std::set<std::string> seen,
           BatchOutcome total) {
  DumpFollower follower(file);
  if (!follower.ok()) return fail(kCommand, "cannot follow " + file + ": " + follower.error());
  std::cerr << "attnscope-cli scan: following " << file << " for new cases; Ctrl-C stops\n";
  while (follower.wait([] { return interrupt_requested(); })) {
    // A failed open (printed) is a step half-written: the next change brings it whole.
    const std::optional<DumpReader> dump = open_dump(kCommand, file, allow_external);
    if (!dump) continue;
    const std::vector<const BrokenCase*> broken = report_broken(kCommand, *dump, pattern, &seen);
    std::vector<const CaseInfo*> fresh;
    for (const CaseInfo& c : dump->cases()) {
      if (pattern_names(pattern, c.path) && seen.insert(c.path).second) fresh.push_back(&c);
    }
    if (fresh.empty() && broken.empty()) continue;
    const BatchOutcome batch = scan_batch(*dump, fresh, broken, settings, json);
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
                      "threads", "follow"})) {
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

  // Cases whose data cannot be read are reported and skipped; they make the exit code 2.
  const std::vector<const BrokenCase*> broken = report_broken(kCommand, *dump, case_path);
  const bool following = args.flag("follow");
  const std::optional<std::vector<const CaseInfo*>> cases =
      following && dump->cases().empty() ? std::vector<const CaseInfo*>{}
                                         : select_cases(kCommand, *dump, case_path);
  if (!cases) return kExitUnreadable;
  settings.cancelled = [] { return interrupt_requested(); };  // polled per kernel tile too
  install_interrupt_handler();
  const BatchOutcome first = scan_batch(*dump, *cases, broken, settings, args.json);
  if (first.interrupted) return kExitInterrupted;
  if (following) {
    std::set<std::string> seen;
    for (const CaseInfo& c : dump->cases()) seen.insert(c.path);
    for (const BrokenCase& b : dump->broken()) seen.insert(b.info.path);
    dump.reset();  // HDF5 shares an open file's cached metadata with a reopening: close it first
    return follow(file, case_path, args.allow_external, settings, args.json, std::move(seen),
                  first);
  }
  if (first.unreadable) return kExitUnreadable;
  return first.errors ? kExitFindings : kExitOk;
}

}  // namespace attnscope
