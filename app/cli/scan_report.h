// What `scan` prints while cases finish, one case at a time: a table row per case (column
// widths fixed up front from the case list) with the findings in detail after the table, or
// the DESIGN §4 JSON document, flushed after every case so a pipe sees it as it grows.
// `merge` rebuilds the JSON document of an unsharded scan from shard reports with the same
// head and tail writers, so both print the same bytes.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/analysis/case_analysis.h"
#include "core/analysis/first_bad_case.h"
#include "core/io/dump_listing.h"
#include "json_writer.h"
#include "run_inputs.h"
#include "shard.h"

namespace attnscope {

// One case to scan and the dump it comes from.
struct ScanItem {
  const InputDump* input = nullptr;
  const CaseInfo* info = nullptr;
};

// "rank_00001.h5::/step_000001/layer_00" in a run folder, the case path for one FILE.
std::string item_path(const ScanItem& item, bool folder);

// A case skipped because its data cannot be read, or a run folder's dump that cannot be opened.
struct SkippedCase {
  std::string path, message, hint;
};

// The JSON head: "file" and, for a run folder, "files".
struct ReportHead {
  std::string file;
  bool folder = false;
  struct File {
    std::string path;  // relative to the folder
    int64_t rank = 0, world_size = -1, local_rank = -1, cases = 0;
    std::string host;
  };
  std::vector<File> files;
};
ReportHead report_head(const Inputs& inputs);
// A run folder's ranks: the largest world_size attribute, at least the distinct ranks; 0 for
// one FILE.
int64_t run_world_size(const ReportHead& head);

struct ScanTotals {
  // total: every case of the scan, all shards together (a shard split by dumps: its own)
  size_t scanned = 0, total = 0;
  double seconds = 0;
  bool interrupted = false;  // SIGINT stopped the scan after `scanned` cases
  std::vector<SkippedCase> skipped;
  int64_t world_size = 0;  // of a run folder (first_bad_case)
};

class ScanReport {
 public:
  virtual ~ScanReport() = default;
  // Before any case: every case that will be scanned, in order.
  virtual void begin(const ReportHead& head, const std::vector<ScanItem>& items) = 0;
  // One analysed case, in case order.
  virtual void add(const ScanItem& item, const CaseAnalysis& a,
                   const AnalysisSettings& settings) = 0;
  // After the last case (or the interruption); closes the JSON document.
  virtual void end(const ScanTotals& totals) = 0;
};

std::unique_ptr<ScanReport> make_table_report(std::ostream& out);
// With a shard, the document ends with "shard": its index, count, split ("dumps" when the
// shard opened only its part of a run folder's dumps, else "cases") and the cases' verdicts.
std::unique_ptr<ScanReport> make_json_report(std::ostream& out, std::optional<Shard> shard,
                                             bool split_by_dumps = false);

// The JSON document's parts before and after the cases (an open object, then the "cases" key;
// closing the object after the tail).
void write_report_head(JsonWriter& json, const ReportHead& head);
void write_report_tail(JsonWriter& json, const std::vector<CaseOutcome>& verdicts,
                       const ScanTotals& totals);

}  // namespace attnscope
