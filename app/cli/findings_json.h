// JSON of an analysed case as `scan --json` prints it (DESIGN §4): path, shape, config (the
// case's attributes plus the analysis settings), stats and findings.
#pragma once

#include "core/analysis/case_analysis.h"
#include "json_writer.h"

namespace attnscope {

// {"kind", "severity", "tensor", "batch", "head", "rows": [first, last], "cols", "count",
//  "message", "remedy", "heads", "precision", "modes"}; -1 / invalid ranges become null.
void write_finding(JsonWriter& json, const Finding& f);

// One element of "cases".
void write_case_analysis(JsonWriter& json, const CaseInfo& info, const CaseAnalysis& a,
                         const AnalysisSettings& settings);

}  // namespace attnscope
