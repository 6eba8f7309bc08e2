// JSON of an analysed case as `scan --json` prints it (DESIGN §4): path, shape, config (the
// case's attributes plus the analysis settings), stats and findings.
#pragma once

#include "core/analysis/case_analysis.h"
#include "json_writer.h"

namespace attnscope {

// "key": [first, last], or null for an invalid range.
void write_range(JsonWriter& json, const char* key, const IndexRange& r);

// {"kind", "severity", "tensor", "batch", "head", "rows": [first, last], "cols", "count",
//  "message", "remedy", "heads", "precision", "modes"}; -1 / invalid ranges become null.
void write_finding(JsonWriter& json, const Finding& f);

// Where a case of a run folder comes from: its dump (relative to the folder) and rank.
struct CaseOrigin {
  std::string file;
  int64_t rank = 0;
};

// One element of "cases"; "file" and "rank" lead it for a case of a run folder.
void write_case_analysis(JsonWriter& json, const CaseInfo& info, const CaseAnalysis& a,
                         const AnalysisSettings& settings, const CaseOrigin* origin = nullptr);

}  // namespace attnscope
