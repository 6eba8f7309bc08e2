// `attnscope-cli merge SHARD.json ...`: joins the reports of `scan --json --shard I/N` (every
// I of one N, any order) into the document the unsharded scan prints, byte for byte: the same
// head and tail writers (scan_report.h), the cases copied verbatim in shard order, and the
// first bad case found again from the shards' verdicts. Shards split by dumps (shard.h) each
// list their own dumps and cases, which are joined; shards split by cases list all of them.
// Exit status as that scan's.
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cli_options.h"
#include "core/io/input_path.h"
#include "scan_report.h"
#include "shard_verdicts.h"

namespace attnscope {
namespace {

constexpr const char* kCommand = "merge";
constexpr const char* kHint = "merge takes the --json reports of `attnscope-cli scan --shard I/N`";
constexpr std::streamsize kMaxReportBytes = std::streamsize{4} << 30;

struct ShardReport {
  std::string path;
  nlohmann::json doc;
  std::vector<std::string> cases;  // each case object's text as scan wrote it
  std::vector<CaseOutcome> verdicts;
  int64_t index = 0, count = 0;
  bool split_by_dumps = false;
};

// The texts of the case objects: the pretty writer puts each at depth 2, from a line "    {"
// to a line "    }" (a comma follows all but the last). Nothing else in the document starts
// a line with exactly four spaces and a brace.
std::vector<std::string> case_texts(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  std::string line, current;
  bool in_cases = false, in_case = false;
  while (std::getline(lines, line)) {
    if (!in_cases) {
      in_cases = line == "  \"cases\": [";
      continue;
    }
    if (!in_case && line == "    {") {
      in_case = true;
      current = "{";
    } else if (in_case && (line == "    }" || line == "    },")) {
      out.push_back(current + "\n    }");
      in_case = false;
    } else if (in_case) {
      current += "\n" + line;
    } else {
      break;  // "  ]," ends the cases
    }
  }
  return out;
}

std::optional<ShardReport> read_report(const std::string& path) {
  const auto bad = [&](const std::string& problem) {
    fail(kCommand, path + ": " + problem, kHint);
    return std::nullopt;
  };
  if (const Status file = check_dump_file(path); !file) {
    fail(kCommand, file.error().message, file.error().hint);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad("cannot be read");
  std::string text;
  in.seekg(0, std::ios::end);
  const std::streamsize size = in.tellg();
  if (size < 0 || size > kMaxReportBytes) return bad("cannot be read or is over 4 GiB");
  text.resize(static_cast<size_t>(size));
  in.seekg(0);
  in.read(text.data(), size);
  ShardReport r;
  r.path = path;
  r.doc = nlohmann::json::parse(text, nullptr, false);
  if (r.doc.is_discarded() || !r.doc.is_object()) return bad("not a JSON document");
  const auto& d = r.doc;
  if (!d.contains("shard") || !d["shard"].is_object()) {
    return bad("not a shard report (no \"shard\"; scan it with --shard I/N)");
  }
  const auto& shard = d["shard"];
  if (!d.contains("file") || !d["file"].is_string() || !d.contains("cases") ||
      !d["cases"].is_array() || !d.contains("cases_total") ||
      !d["cases_total"].is_number_integer() || !d.contains("interrupted") ||
      !d["interrupted"].is_boolean() || !d.contains("broken") || !d["broken"].is_array() ||
      !shard.contains("index") || !shard["index"].is_number_integer() || !shard.contains("count") ||
      !shard["count"].is_number_integer() || !shard.contains("verdicts") ||
      !shard["verdicts"].is_array() || !shard.contains("split") ||
      (shard["split"] != "dumps" && shard["split"] != "cases")) {
    return bad("a field of a scan report is missing or of the wrong type");
  }
  r.split_by_dumps = shard["split"] == "dumps";
  r.index = shard["index"].get<int64_t>();
  r.count = shard["count"].get<int64_t>();
  for (const auto& v : shard["verdicts"]) {
    std::optional<CaseOutcome> verdict = read_verdict(v);
    if (!verdict) return bad("a verdict of \"shard\" is malformed");
    r.verdicts.push_back(std::move(*verdict));
  }
  r.cases = case_texts(text);
  if (r.cases.size() != d["cases"].size() || r.verdicts.size() != r.cases.size()) {
    return bad("its cases are not laid out as scan --json writes them");
  }
  return r;
}

// Adds the head a shard wrote ("file", and the "files" of a run folder) to `head`; false when
// malformed.
bool read_head(const nlohmann::json& d, ReportHead& head) {
  head.file = d["file"].get<std::string>();
  if (!d.contains("files")) return true;
  head.folder = true;
  if (!d["files"].is_array()) return false;
  for (const auto& f : d["files"]) {
    ReportHead::File file;
    const auto known = [&](const char* key, int64_t& into) {
      if (f[key].is_null()) return true;
      if (!f[key].is_number_integer()) return false;
      into = f[key].get<int64_t>();
      return true;
    };
    if (!f.is_object() || !f.contains("path") || !f["path"].is_string() || !f.contains("host") ||
        !f["host"].is_string() || !f.contains("rank") || !f["rank"].is_number_integer() ||
        !f.contains("cases") || !f["cases"].is_number_integer() || !f.contains("world_size") ||
        !f.contains("local_rank") || !known("world_size", file.world_size) ||
        !known("local_rank", file.local_rank)) {
      return false;
    }
    file.path = f["path"].get<std::string>();
    file.host = f["host"].get<std::string>();
    file.rank = f["rank"].get<int64_t>();
    file.cases = f["cases"].get<int64_t>();
    head.files.push_back(std::move(file));
  }
  return true;
}

// Whether `r` and `first` are shards of one scan: the same input, N and split, and for a
// split by cases the same dumps and cases.
bool same_scan(const ShardReport& r, const ShardReport& first) {
  if (r.count != first.count || r.split_by_dumps != first.split_by_dumps ||
      r.doc["file"] != first.doc["file"]) {
    return false;
  }
  return r.split_by_dumps ||
         (r.doc.value("files", nlohmann::json()) == first.doc.value("files", nlohmann::json()) &&
          r.doc["cases_total"] == first.doc["cases_total"]);
}

}  // namespace

int run_merge(const CommandArgs& args) {
  if (!check_options(args, kCommand, {})) return kExitUnreadable;
  if (args.positional.empty()) {
    return fail(kCommand, "expected the shard reports (got none)",
                "attnscope-cli merge shard_0.json shard_1.json ...");
  }
  std::map<int64_t, ShardReport> shards;
  for (const std::string& path : args.positional) {
    std::optional<ShardReport> r = read_report(path);
    if (!r) return kExitUnreadable;
    const ShardReport* first = shards.empty() ? nullptr : &shards.begin()->second;
    if (first != nullptr && !same_scan(*r, *first)) {
      return fail(kCommand, path + " is a shard of another scan than " + first->path,
                  "merge the shards of one scan: the same FILE or folder, the same N");
    }
    const int64_t index = r->index;
    if (!shards.emplace(index, std::move(*r)).second) {
      return fail(kCommand, path + ": shard " + std::to_string(index) + " is given twice", kHint);
    }
  }
  const int64_t count = shards.begin()->second.count;
  if (static_cast<int64_t>(shards.size()) != count || shards.begin()->first != 0 ||
      shards.rbegin()->first != count - 1) {
    std::string missing;
    for (int64_t i = 0; i < count; ++i) {
      if (!shards.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    }
    return fail(kCommand, "shards " + missing + " of " + std::to_string(count) + " are missing",
                "pass every shard report of the scan");
  }
  // The head and the total: every shard's own joined when split by dumps, else the first's.
  const bool by_dumps = shards.begin()->second.split_by_dumps;
  ReportHead head;
  ScanTotals totals;
  for (const auto& [index, shard] : shards) {
    if (!read_head(shard.doc, head)) {
      return fail(kCommand, shard.path + ": its \"files\" are malformed", kHint);
    }
    totals.total += shard.doc["cases_total"].get<size_t>();
    if (!by_dumps) break;
  }
  totals.world_size = run_world_size(head);
  std::vector<CaseOutcome> verdicts;
  JsonWriter json(std::cout);
  write_report_head(json, head);
  json.key("cases").begin_array();
  for (const auto& [index, shard] : shards) {
    for (const std::string& text : shard.cases) json.raw(text);
    verdicts.insert(verdicts.end(), shard.verdicts.begin(), shard.verdicts.end());
    totals.interrupted = totals.interrupted || shard.doc["interrupted"].get<bool>();
    for (const auto& b : shard.doc["broken"]) {
      totals.skipped.push_back({b.value("path", ""), b.value("message", ""), b.value("hint", "")});
    }
  }
  totals.scanned = verdicts.size();
  json.end_array();
  write_report_tail(json, verdicts, totals);
  json.end_object();
  std::cout.flush();
  if (!totals.skipped.empty()) return kExitUnreadable;
  const bool errors = std::any_of(verdicts.begin(), verdicts.end(), [](const CaseOutcome& v) {
    return v.forward_error || v.backward_error;
  });
  return errors ? kExitFindings : kExitOk;
}

}  // namespace attnscope
