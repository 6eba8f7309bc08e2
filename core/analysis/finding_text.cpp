// Number and location formatting for finding messages, and head grouping.
#include "core/analysis/finding_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

namespace attnscope {

std::string num(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  const double a = std::fabs(x);
  if (a == 0 || (a >= 1e-3 && a < 1e3)) {
    std::snprintf(buf, sizeof buf, "%.3g", x);
    return buf;
  }
  if (a >= 1e3 && a < 1e5) {
    std::snprintf(buf, sizeof buf, "%.0f", x);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.3g", x);  // "8.51e+05" -> "8.51e5", "1e-07" -> "1e-7"
  std::string s = buf;
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mantissa = s.substr(0, e), exponent = s.substr(e + 1);
  const bool negative = exponent[0] == '-';
  exponent = exponent.substr(exponent[0] == '-' || exponent[0] == '+' ? 1 : 0);
  exponent.erase(0, std::min(exponent.find_first_not_of('0'), exponent.size() - 1));
  return mantissa + "e" + (negative ? "-" : "") + exponent;
}

std::string count_text(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  for (int64_t pos = static_cast<int64_t>(digits.size()) - 3; pos > 0; pos -= 3) {
    digits.insert(static_cast<size_t>(pos), ",");
  }
  return (n < 0 ? "-" : "") + digits;
}

std::string range_text(const std::string& label, const IndexRange& r) {
  if (!r.valid()) return "";
  if (r.first == r.last) {
    const std::string singular = label.back() == 's' ? label.substr(0, label.size() - 1) : label;
    return singular + " " + std::to_string(r.first);
  }
  return label + " " + std::to_string(r.first) + "-" + std::to_string(r.last);
}

std::vector<HitGroup> group_hits(std::vector<HeadHit> hits) {
  std::vector<size_t> order(hits.size());
  for (size_t n = 0; n < order.size(); ++n) order[n] = n;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(hits[a].batch, hits[a].head) < std::tie(hits[b].batch, hits[b].head);
  });
  std::vector<HitGroup> groups;
  for (size_t n : order) {
    const HeadHit& hit = hits[n];
    if (!groups.empty()) {
      HitGroup& g = groups.back();
      const bool same_place = g.rows.first == hit.rows.first && g.rows.last == hit.rows.last &&
                              g.cols.first == hit.cols.first && g.cols.last == hit.cols.last &&
                              g.tag == hit.tag;
      if (g.batch == hit.batch && g.heads.last + 1 == hit.head && same_place) {
        g.heads.last = hit.head;
        g.count += hit.count;
        g.hits.push_back(n);
        continue;
      }
    }
    groups.push_back(
        {hit.batch, {hit.head, hit.head}, hit.rows, hit.cols, hit.count, hit.tag, {n}});
  }
  return groups;
}

std::string where_text(const HitGroup& g, const std::string& head_label,
                       const std::string& rows_label, int64_t group) {
  std::string out = g.batch >= 0 ? "batch " + std::to_string(g.batch) : "";
  auto add = [&](const std::string& part) {
    if (!part.empty()) out += (out.empty() ? "" : ", ") + part;
  };
  if (g.heads.valid() && g.heads.first >= 0) {
    std::string heads = range_text(head_label + "s", g.heads);
    if (group > 1) {
      heads += " (" +
               range_text("query heads", {g.heads.first * group, (g.heads.last + 1) * group - 1}) +
               ")";
    }
    add(heads);
  }
  add(range_text(rows_label, g.rows));
  add(range_text("cols", g.cols));
  return out;
}

std::string rows_count_text(const HitGroup& g) {
  const std::string rows = count_text(g.count) + (g.count == 1 ? " row" : " rows");
  if (!g.heads.valid() || g.heads.first == g.heads.last) return rows;
  return rows + " over " + std::to_string(g.heads.last - g.heads.first + 1) + " heads";
}

Finding located(FindingKind kind, Severity severity, const std::string& tensor, const HitGroup& g) {
  Finding f;
  f.kind = kind;
  f.severity = severity;
  f.tensor = tensor;
  f.batch = g.batch;
  const bool one_head = g.heads.valid() && g.heads.first == g.heads.last;
  f.head = one_head ? g.heads.first : -1;
  if (!one_head) f.heads = g.heads;
  f.rows = g.rows;
  f.cols = g.cols;
  f.count = g.count;
  return f;
}

namespace {

FindingLocation location_of(const Finding& f) {
  return {f.batch, f.head, f.heads, f.rows, f.cols, f.count};
}

// "batch 1, heads 0-3 (26)"
std::string location_text(const FindingLocation& l) {
  HitGroup g{l.batch, l.head >= 0 ? IndexRange{l.head, l.head} : l.heads, {}, {}, 0, "", {}};
  std::string where = where_text(g);
  if (where.empty()) where = "the whole case";
  return where + " (" + count_text(l.count) + ")";
}

}  // namespace

void group_findings(std::vector<Finding>& findings) {
  sort_findings(findings);
  std::vector<Finding> out;
  for (Finding& f : findings) {
    auto same = std::find_if(out.begin(), out.end(), [&](const Finding& g) {
      return g.kind == f.kind && g.tensor == f.tensor && g.severity == f.severity &&
             g.what_if == f.what_if;
    });
    if (same == out.end()) {
      f.locations = {location_of(f)};
      out.push_back(std::move(f));
      continue;
    }
    same->locations.push_back(location_of(f));
    same->count += f.count;
    for (const std::string& m : f.modes) {
      if (std::find(same->modes.begin(), same->modes.end(), m) == same->modes.end()) {
        same->modes.push_back(m);
      }
    }
  }
  // Several places: the lead keeps its own message (the first place's evidence), says where
  // else the finding was seen, and names its batch / heads only where they are common.
  constexpr size_t kListed = 6;
  for (Finding& f : out) {
    if (f.locations.size() < 2) continue;
    std::string others;
    for (size_t n = 1; n < f.locations.size() && n <= kListed; ++n) {
      others += (n == 1 ? "" : "; ") + location_text(f.locations[n]);
    }
    if (f.locations.size() > kListed + 1) {
      others += "; and " + std::to_string(f.locations.size() - kListed - 1) + " more";
    }
    f.message += " [" + std::to_string(f.locations.size()) + " places, " + count_text(f.count) +
                 " in all; also " + others + "]";
    IndexRange heads, rows, cols;
    bool one_batch = true;
    for (const FindingLocation& l : f.locations) {
      heads = heads.merged(l.head >= 0 ? IndexRange{l.head, l.head} : l.heads);
      rows = rows.merged(l.rows);
      cols = cols.merged(l.cols);
      one_batch = one_batch && l.batch == f.locations.front().batch;
    }
    f.batch = one_batch ? f.locations.front().batch : -1;
    f.head = heads.valid() && heads.first == heads.last ? heads.first : -1;
    f.heads = f.head >= 0 ? IndexRange{} : heads;
    f.rows = rows;
    f.cols = cols;
  }
  findings = std::move(out);
}

std::string modes_text(const std::vector<std::string>& modes, const std::string& precision) {
  std::string out;
  for (size_t n = 0; n < modes.size(); ++n) {
    out += (n == 0 ? "" : n + 1 == modes.size() ? " and " : ", ") + modes[n];
  }
  return out.empty() ? precision : out + " " + precision;
}

}  // namespace attnscope
