// Table and JSON reports of `scan`.
#include "scan_report.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "case_format.h"
#include "core/analysis/finding_text.h"
#include "core/analysis/first_bad_case.h"
#include "findings_json.h"
#include "shard_verdicts.h"

namespace attnscope {
namespace {

// "clip_grad_norm_(max_norm=1, whole case) on fused bf16: total 1.76e5 -> 1, coef 5.69e-6".
std::vector<std::string> clip_lines(const CaseAnalysis& a) {
  std::vector<std::string> lines;
  for (const ClipReport& c : a.clips) {
    std::string coefs;
    for (const ClipResult& r : c.clips) coefs += (coefs.empty() ? "" : ", ") + num(r.coef);
    lines.push_back("clip_grad_norm_(max_norm=" + num(c.max_norm) + ", " +
                    (c.scope == ClipScope::whole_case ? "whole case" : "per kv head") + ") on " +
                    mode_name(c.mode) + " " + precision_name(a.params.precision) + ": total " +
                    num(c.before.total) + " -> " + num(c.after.total) + ", coef " + coefs);
  }
  return lines;
}

std::string location(const Finding& f) {
  std::string out;
  auto add = [&](const std::string& part) {
    if (!part.empty()) out += (out.empty() ? "" : ", ") + part;
  };
  if (f.batch >= 0) add("batch " + std::to_string(f.batch));
  if (f.head >= 0) add("head " + std::to_string(f.head));
  add(range_text("heads", f.heads));
  add(range_text("rows", f.rows));
  add(range_text("cols", f.cols));
  return out.empty() ? "-" : out;
}

// Why the first bad case may not be the first: "2 cases could not be read (see the skipped
// messages); any of them may have gone wrong before it".
std::string unread_note(size_t unread) {
  return std::to_string(unread) + (unread == 1 ? " case" : " cases") +
         " could not be read (see the skipped messages); any of them may have gone wrong "
         "before it";
}

// "score_overflow x2 nonfinite_output" over the error and warning findings.
std::string kinds_text(const std::vector<Finding>& findings) {
  std::map<std::string, int> counts;
  std::vector<std::string> order;
  for (const Finding& f : findings) {
    if (f.severity == Severity::info) continue;
    const std::string k = finding_kind_name(f.kind);
    if (counts[k]++ == 0) order.push_back(k);
  }
  std::string out;
  for (const std::string& k : order) {
    out += (out.empty() ? "" : " ") + k + (counts[k] > 1 ? " x" + std::to_string(counts[k]) : "");
  }
  return out.empty() ? "-" : out;
}

class TableReport : public ScanReport {
 public:
  explicit TableReport(std::ostream& out) : out_(out) {}

  void begin(const ReportHead& head, const std::vector<ScanItem>& items) override {
    file_ = head.file;
    folder_ = head.folder;
    widths_ = {4, 5, 9, 6, 8, 4};
    for (const ScanItem& item : items) {
      widths_[0] = std::max(widths_[0], item_path(item, folder_).size());
      widths_[1] = std::max(widths_[1], dims_text(item.info->dims).size());
    }
    out_ << file_ << ": " << items.size() << " case" << (items.size() == 1 ? "" : "s");
    if (folder_) out_ << " in " << head.files.size() << " dumps of a run";
    out_ << "\n\n";
    row({"case", "shape", "precision", "errors", "warnings", "info", "kinds"});
    std::vector<std::string> rule;
    for (size_t w : widths_) rule.push_back(std::string(w, '-'));
    rule.push_back("-----");
    row(rule);
    out_.flush();
  }

  void add(const ScanItem& item, const CaseAnalysis& a, const AnalysisSettings&) override {
    const CaseInfo& info = *item.info;
    const std::string path = item_path(item, folder_);
    verdicts_.push_back(outcome_of(info, a.findings, item.input->rank));
    verdicts_.back().path = path;
    int64_t n[3];
    for (int s = 0; s < 3; ++s) {
      n[s] = count_severity(a.findings, static_cast<Severity>(s));
      totals_[s] += n[s];
    }
    row({path, dims_text(info.dims), precision_name(a.params.precision), std::to_string(n[0]),
         std::to_string(n[1]), std::to_string(n[2]), kinds_text(a.findings)});
    out_.flush();
    if (!a.findings.empty() || !a.clips.empty() || !a.reference_note.empty() ||
        a.what_if_explains) {
      std::vector<std::string> notes = clip_lines(a);
      if (!a.reference_note.empty()) notes.push_back("note: " + a.reference_note);
      if (const std::string explains = what_if_explains_text(a); !explains.empty()) {
        notes.insert(notes.begin(), explains);
      }
      notes.insert(notes.begin(), "judged " + a.judged_under);
      details_.push_back({path, a.findings, std::move(notes)});
    }
  }

  void end(const ScanTotals& t) override {
    if (const std::optional<FirstBadCase> first = first_bad_case(verdicts_, t.world_size)) {
      out_ << "\nfirst bad case: " << first->text << "\n  " << first->lead << "\n";
      if (first->nonfinite) out_ << "first NaN/Inf: " << first->nonfinite->text << "\n";
      if (!t.skipped.empty()) out_ << "note: " << unread_note(t.skipped.size()) << "\n";
    }
    for (const Detail& d : details_) {
      out_ << "\n" << d.path << "\n";
      for (const std::string& line : d.clips) out_ << "  " << line << "\n";
      for (const Finding& f : d.findings) {
        out_ << "  " << severity_name(f.severity) << "  " << finding_kind_name(f.kind) << "  "
             << f.tensor << "  " << location(f);
        if (!f.modes.empty()) out_ << "  [" << modes_text(f.modes, f.precision) << "]";
        if (f.what_if) out_ << "  (what-if)";
        out_ << "\n    " << f.message << "\n    remedy: " << f.remedy << "\n";
      }
    }
    char timing[64];
    std::snprintf(timing, sizeof timing, "%.2f s", t.seconds);
    out_ << "\n" << file_ << ": ";
    if (t.interrupted) out_ << "interrupted, ";
    if (t.interrupted || t.scanned != t.total) out_ << t.scanned << " of ";  // or a shard
    out_ << t.total << " case" << (t.total == 1 ? "" : "s") << " scanned in " << timing << ": "
         << totals_[0] << " errors, " << totals_[1] << " warnings, " << totals_[2] << " info\n";
    if (!t.skipped.empty()) {
      out_ << t.skipped.size() << " case" << (t.skipped.size() == 1 ? "" : "s")
           << " skipped, unreadable:";
      for (const SkippedCase& c : t.skipped) out_ << " " << c.path;
      out_ << "\n";
    }
    out_.flush();
  }

 private:
  struct Detail {
    std::string path;
    std::vector<Finding> findings;
    std::vector<std::string> clips;  // one line per clipped run, then the reference note
  };

  // Cells padded to the fixed widths; the last column is not padded.
  void row(const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      line += cells[c];
      if (c < widths_.size())
        line += std::string(widths_[c] - std::min(widths_[c], cells[c].size()) + 2, ' ');
    }
    out_ << line << '\n';
  }

  std::ostream& out_;
  std::string file_;
  bool folder_ = false;
  std::vector<size_t> widths_;
  int64_t totals_[3] = {0, 0, 0};
  std::vector<Detail> details_;
  std::vector<CaseOutcome> verdicts_;
};

// "first_bad": the origin case, whether it started in the backward, the cases it propagates
// into (paths), the later steps with errors, the one-line text, and how many cases could not be
// read (`unread`: any of them may have come first); null without errors.
void write_first_bad(JsonWriter& json, const std::vector<CaseOutcome>& verdicts, int64_t world_size,
                     size_t unread) {
  json.key("first_bad");
  const std::optional<FirstBadCase> first = first_bad_case(verdicts, world_size);
  if (!first) {
    json.null();
    return;
  }
  const CaseOutcome& v = verdicts[first->index];
  const auto paths = [&](const std::vector<size_t>& cases) {
    std::vector<std::string> out;
    for (size_t n : cases) out.push_back(verdicts[n].path);
    return out;
  };
  const auto optional = [&](const char* key, std::optional<int64_t> value) {
    json.key(key);
    if (value)
      json.value(*value);
    else
      json.null();
  };
  json.begin_object().field("path", v.path);
  optional("step", v.step);
  optional("layer", v.layer);
  optional("head", first->head >= 0 ? std::optional<int64_t>(first->head) : std::nullopt);
  optional("rank", v.rank);
  json.field("ranks", first->ranks);
  json.key("scope");
  if (first->scope.empty())
    json.null();
  else
    json.value(first->scope);
  json.field("from_backward", first->from_backward).field("kinds", v.kinds);
  json.field("forward_into", paths(first->forward_into));
  json.field("backward_into", paths(first->backward_into));
  json.field("later_steps", first->later_steps).field("text", first->text);
  // Where the first NaN / Inf appeared in execution order (the window opens there).
  json.key("nonfinite_origin");
  if (const std::optional<FirstNonfinite>& nf = first->nonfinite) {
    const CaseOutcome& at = verdicts[nf->index];
    json.begin_object().field("path", at.path);
    optional("step", at.step);
    optional("micro_batch", at.micro_batch);
    optional("layer", at.layer);
    optional("rank", at.rank);
    json.field("side", is_backward_stage(nf->site.stage) ? "backward" : "forward");
    json.key("site");
    write_site(json, nf->site);
    json.field("text", nf->text).end_object();
  } else {
    json.null();
  }
  json.field("lead", first->lead);
  json.field("unread", static_cast<int64_t>(unread));
  if (unread > 0) json.field("unread_note", unread_note(unread));
  json.end_object();
}

class JsonReport : public ScanReport {
 public:
  JsonReport(std::ostream& out, std::optional<Shard> shard, bool split_by_dumps)
      : out_(out), json_(out), shard_(shard), split_by_dumps_(split_by_dumps) {}

  void begin(const ReportHead& head, const std::vector<ScanItem>&) override {
    folder_ = head.folder;
    write_report_head(json_, head);
    json_.key("cases").begin_array();
    out_.flush();
  }

  void add(const ScanItem& item, const CaseAnalysis& a, const AnalysisSettings& s) override {
    verdicts_.push_back(outcome_of(*item.info, a.findings, item.input->rank));
    verdicts_.back().path = item_path(item, folder_);
    std::optional<CaseOrigin> origin;
    if (folder_) origin = CaseOrigin{item.input->name, *item.input->rank};
    write_case_analysis(json_, *item.info, a, s, origin ? &*origin : nullptr);
    out_.flush();
  }

  void end(const ScanTotals& t) override {
    json_.end_array();
    write_report_tail(json_, verdicts_, t);
    if (shard_) {
      json_.key("shard").begin_object();
      json_.field("index", shard_->index).field("count", shard_->count);
      json_.field("split", split_by_dumps_ ? "dumps" : "cases");
      json_.key("verdicts").begin_array();
      for (const CaseOutcome& v : verdicts_) write_verdict(json_, v);
      json_.end_array().end_object();
    }
    json_.end_object();
    out_.flush();
  }

 private:
  std::ostream& out_;
  JsonWriter json_;
  std::optional<Shard> shard_;
  bool split_by_dumps_;
  bool folder_ = false;
  std::vector<CaseOutcome> verdicts_;
};

}  // namespace

std::unique_ptr<ScanReport> make_table_report(std::ostream& out) {
  return std::make_unique<TableReport>(out);
}

std::unique_ptr<ScanReport> make_json_report(std::ostream& out, std::optional<Shard> shard,
                                             bool split_by_dumps) {
  return std::make_unique<JsonReport>(out, shard, split_by_dumps);
}

std::string item_path(const ScanItem& item, bool folder) {
  return folder ? item.input->name + "::" + item.info->path : item.info->path;
}

ReportHead report_head(const Inputs& inputs) {
  ReportHead head;
  head.file = inputs.path;
  head.folder = inputs.folder;
  if (!inputs.folder) return head;
  for (const InputDump& d : inputs.dumps) {
    const RankIdentity& id = d.reader.rank_identity();
    head.files.push_back({d.name, *d.rank, id.world_size, id.local_rank,
                          static_cast<int64_t>(d.reader.cases().size()), id.host});
  }
  return head;
}

int64_t run_world_size(const ReportHead& head) {
  int64_t world = 0;
  std::set<int64_t> ranks;
  for (const ReportHead::File& f : head.files) {
    world = std::max(world, f.world_size);
    ranks.insert(f.rank);
  }
  return std::max(world, static_cast<int64_t>(ranks.size()));
}

void write_report_head(JsonWriter& json, const ReportHead& head) {
  json.begin_object().field("file", head.file);
  if (!head.folder) return;
  const auto known = [&](const char* key, int64_t value) {
    json.key(key);
    if (value >= 0)
      json.value(value);
    else
      json.null();
  };
  json.key("files").begin_array();
  for (const ReportHead::File& f : head.files) {
    json.begin_object().field("path", f.path).field("rank", f.rank);
    known("world_size", f.world_size);
    known("local_rank", f.local_rank);
    json.field("host", f.host).field("cases", f.cases).end_object();
  }
  json.end_array();
}

void write_report_tail(JsonWriter& json, const std::vector<CaseOutcome>& verdicts,
                       const ScanTotals& totals) {
  write_first_bad(json, verdicts, totals.world_size, totals.skipped.size());
  json.field("cases_total", static_cast<int64_t>(totals.total));
  json.field("interrupted", totals.interrupted);
  json.key("broken").begin_array();
  for (const SkippedCase& c : totals.skipped) {
    json.begin_object().field("path", c.path).field("message", c.message);
    json.field("hint", c.hint).end_object();
  }
  json.end_array();
}

}  // namespace attnscope
