// Non-finite findings in stage order (see nonfinite_origin.h).
#include "core/analysis/nonfinite_origin.h"

#include <algorithm>

namespace attnscope {

namespace {

// The stage and view of a non-finite finding; nullopt for findings that hold no NaN / Inf.
std::optional<std::pair<NonfiniteStage, std::string>> stage_of(const Finding& f) {
  if (f.severity != Severity::error) return std::nullopt;
  switch (f.kind) {
    case FindingKind::nonfinite_input:
      return std::make_pair(f.tensor == "dO" ? NonfiniteStage::upstream : NonfiniteStage::inputs,
                            f.tensor);
    case FindingKind::score_overflow:
    case FindingKind::mask_fill_overflow:
      return std::make_pair(NonfiniteStage::scores, std::string("S"));
    case FindingKind::fully_masked_row:  // exp(-inf - -inf) = NaN: first in P
      return std::make_pair(NonfiniteStage::probabilities, std::string("P"));
    case FindingKind::exp_overflow:
      return f.tensor == "P" ? std::make_pair(NonfiniteStage::probabilities, std::string("P"))
                             : std::make_pair(NonfiniteStage::outputs, std::string("LSE"));
    case FindingKind::masked_nan_leak:
    case FindingKind::nonfinite_output:
      return std::make_pair(NonfiniteStage::outputs, f.tensor == "LSE" ? f.tensor : "O");
    case FindingKind::nonfinite_gradient:
      return std::make_pair(NonfiniteStage::gradients, f.tensor);
    default:
      return std::nullopt;
  }
}

std::string range_text(const char* what, const IndexRange& r) {
  if (!r.valid()) return {};
  return std::string(", ") + what + " " + std::to_string(r.first) +
         (r.last > r.first ? "-" + std::to_string(r.last) : "");
}

}  // namespace

const char* nonfinite_stage_name(NonfiniteStage stage) {
  switch (stage) {
    case NonfiniteStage::inputs:
      return "inputs";
    case NonfiniteStage::scores:
      return "S";
    case NonfiniteStage::probabilities:
      return "P";
    case NonfiniteStage::outputs:
      return "O";
    case NonfiniteStage::upstream:
      return "dO";
    case NonfiniteStage::gradients:
      return "gradients";
  }
  return "?";
}

std::optional<NonfiniteStage> nonfinite_stage_named(const std::string& name) {
  for (NonfiniteStage s :
       {NonfiniteStage::inputs, NonfiniteStage::scores, NonfiniteStage::probabilities,
        NonfiniteStage::outputs, NonfiniteStage::upstream, NonfiniteStage::gradients}) {
    if (name == nonfinite_stage_name(s)) return s;
  }
  return std::nullopt;
}

bool is_backward_stage(NonfiniteStage stage) {
  return stage == NonfiniteStage::upstream || stage == NonfiniteStage::gradients;
}

bool NonfiniteSite::operator==(const NonfiniteSite& o) const {
  return stage == o.stage && kind == o.kind && view == o.view && batch == o.batch &&
         head == o.head && rows.first == o.rows.first && rows.last == o.rows.last &&
         cols.first == o.cols.first && cols.last == o.cols.last && count == o.count &&
         modes == o.modes && message == o.message;
}

std::vector<NonfiniteSite> nonfinite_sites(const std::vector<Finding>& findings) {
  std::vector<NonfiniteSite> out;
  for (const Finding& f : findings) {
    const auto stage = stage_of(f);
    if (!stage) continue;
    NonfiniteSite s;
    s.stage = stage->first;
    s.kind = finding_kind_name(f.kind);
    s.view = stage->second;
    s.batch = std::max<int64_t>(f.batch, 0);
    s.head = f.head >= 0 ? f.head : f.heads.valid() ? f.heads.first : 0;
    s.rows = f.rows;
    s.cols = f.cols;
    s.count = f.count;
    s.modes = f.modes;
    s.message = f.message;
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(), [](const NonfiniteSite& a, const NonfiniteSite& b) {
    return a.stage < b.stage;
  });
  return out;
}

std::string site_text(const NonfiniteSite& site) {
  return site.view + " in batch " + std::to_string(site.batch) + ", head " +
         std::to_string(site.head) + range_text("rows", site.rows) + range_text("cols", site.cols) +
         " (" + site.kind + ")";
}

}  // namespace attnscope
