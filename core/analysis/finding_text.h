// Building blocks of finding messages: compact numbers ("8.5e5", "65504"), index ranges, the
// location of a group of heads, run contexts ("unfused fp16"), and grouping of per-head
// evidence into one finding per batch and run of consecutive heads with the same rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/finding.h"

namespace attnscope {

// 3 significant digits in [1e-3, 1e3), whole numbers in [1e3, 1e5) ("65504"), else "8.51e5";
// "NaN", "inf", "-inf".
std::string num(double x);
// Thousands separators: 4524 -> "4,524".
std::string count_text(int64_t n);
// "rows 12-40", "row 12" (label "rows" / "keys" / "cols"); empty for an invalid range.
std::string range_text(const std::string& label, const IndexRange& r);

// Per-(batch, head) evidence of one finding.
struct HeadHit {
  int64_t batch = 0, head = 0;
  IndexRange rows, cols;
  int64_t count = 0;
  std::string tag;  // what the message will say about the head; only equal tags group
};

// Hits of one batch over consecutive heads that share rows, cols and tag.
struct HitGroup {
  int64_t batch = 0;
  IndexRange heads;
  IndexRange rows, cols;
  int64_t count = 0;  // summed over the group
  std::string tag;
  std::vector<size_t> hits;  // indices into the input
};

// Groups hits (in any order) by batch, then runs of consecutive heads with equal rows, cols
// and tags.
std::vector<HitGroup> group_hits(std::vector<HeadHit> hits);

// "batch 1, heads 0-3, rows 70-95" (head_label "head" or "kv head"; rows_label "rows"/"keys").
// With kv heads shared by `group` > 1 query heads, the query heads are named too:
// "kv heads 1 (query heads 2-3)".
std::string where_text(const HitGroup& g, const std::string& head_label = "head",
                       const std::string& rows_label = "rows", int64_t group = 1);

// "26 rows" for one head, "104 rows over 4 heads" for several (g.count counts rows).
std::string rows_count_text(const HitGroup& g);

// A finding located at a group: batch, head (-1 and `heads` when several), rows, cols, count.
Finding located(FindingKind kind, Severity severity, const std::string& tensor, const HitGroup& g);

// "unfused fp16", "fused and unfused fp16".
std::string modes_text(const std::vector<std::string>& modes, const std::string& precision);

// Inclusive range of the indices in [0, n) where flag(i) holds (invalid when none).
template <typename Pred>
IndexRange flagged_range(int64_t n, const Pred& flag) {
  IndexRange r;
  for (int64_t i = 0; i < n; ++i) {
    if (flag(i)) r = r.merged({i, i});
  }
  return r;
}

}  // namespace attnscope
