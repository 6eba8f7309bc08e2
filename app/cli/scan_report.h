// What `scan` prints while cases finish, one case at a time: a table row per case (column
// widths fixed up front from the case list) with the findings in detail after the table, or
// the DESIGN §4 JSON document, flushed after every case so a pipe sees it as it grows.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "core/analysis/case_analysis.h"
#include "core/io/dump_listing.h"

namespace attnscope {

struct ScanTotals {
  size_t scanned = 0, total = 0;
  double seconds = 0;
  bool interrupted = false;  // SIGINT stopped the scan after `scanned` of `total` cases
  std::vector<const BrokenCase*> broken;  // cases skipped: their data cannot be read
};

class ScanReport {
 public:
  virtual ~ScanReport() = default;
  // Before any case: the file and every case that will be scanned, in order.
  virtual void begin(const std::string& file, const std::vector<const CaseInfo*>& cases) = 0;
  // One analysed case, in case order.
  virtual void add(const CaseInfo& info, const CaseAnalysis& a,
                   const AnalysisSettings& settings) = 0;
  // After the last case (or the interruption); closes the JSON document.
  virtual void end(const ScanTotals& totals) = 0;
};

std::unique_ptr<ScanReport> make_table_report(std::ostream& out);
std::unique_ptr<ScanReport> make_json_report(std::ostream& out);

}  // namespace attnscope
