// First bad case: forward / backward verdicts per case, then the origin of the earliest bad
// step and the cases it propagates into.
#include "core/analysis/first_bad_case.h"

#include <algorithm>
#include <tuple>

namespace attnscope {
namespace {

// Whether v's step ran several micro-batches (gradient accumulation): then every place in it
// names its micro-batch, the first one too.
bool several_micro_batches(const std::vector<CaseOutcome>& all, const CaseOutcome& v) {
  return std::any_of(all.begin(), all.end(), [&](const CaseOutcome& o) {
    return o.step == v.step && o.rank == v.rank && o.micro_batch.value_or(0) > 0;
  });
}

// "step 3, layer 2, head 5, rank 1", "step 0, micro-batch 1, layer 0", or the path when the case
// has none of them; the path follows in parentheses. `all`: the outcomes v is one of.
std::string place(const std::vector<CaseOutcome>& all, const CaseOutcome& v, int64_t head) {
  std::string out;
  const auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (v.step) add("step " + std::to_string(*v.step));
  if (v.micro_batch && several_micro_batches(all, v)) {
    add("micro-batch " + std::to_string(*v.micro_batch));
  }
  if (v.layer) add("layer " + std::to_string(*v.layer));
  if (head >= 0 && !out.empty()) add("head " + std::to_string(head));
  if (v.rank) add("rank " + std::to_string(*v.rank));
  return out.empty() ? v.path : out + " (" + v.path + ")";
}

std::string list(const std::vector<CaseOutcome>& v, const std::vector<size_t>& cases) {
  std::string out;
  for (size_t n = 0; n < cases.size() && n < 8; ++n) {
    const CaseOutcome& c = v[cases[n]];
    out += (n ? ", " : "") + (c.layer ? "layer " + std::to_string(*c.layer) : c.path);
  }
  if (cases.size() > 8) out += " and " + std::to_string(cases.size() - 8) + " more";
  return out;
}

bool bad(const CaseOutcome& v) {
  return v.forward_error || v.backward_error;
}

// When one side of a case ran within its step: the recorder's event counter (forward_seq,
// backward_seq) when the case carries it, else (micro-batch, forward before backward, layers
// ascending in the forward and descending in the backward; `fallback` stands in for a missing
// layer). A step's cases either all carry the counter (the recorder's dumps) or none do.
using StepOrder = std::tuple<int64_t, int64_t, int64_t>;
StepOrder step_order(const CaseOutcome& v, bool backward, int64_t fallback) {
  if (const std::optional<int64_t>& seq = backward ? v.backward_seq : v.forward_seq) {
    return {-1, *seq, 0};
  }
  const int64_t layer = v.layer.value_or(fallback);
  return {v.micro_batch.value_or(0), backward ? 1 : 0, backward ? -layer : layer};
}

// The origin among `members` (indices into verdicts, in case order, one rank): in the first bad
// step, the side that went wrong first in execution order (step_order). A forward error comes
// before every backward of its micro-batch; in the backward the first bad layer is where the
// gradients went wrong (its dO finite), or where a dO made non-finite outside attention arrived.
// Then the cases of its micro-batch it poisoned. nullopt when none of them is bad.
std::optional<FirstBadCase> origin_among(const std::vector<CaseOutcome>& verdicts,
                                         const std::vector<size_t>& members) {
  const auto first =
      std::find_if(members.begin(), members.end(), [&](size_t n) { return bad(verdicts[n]); });
  if (first == members.end()) return std::nullopt;
  // The cases of the first bad step (cases without a step form one step).
  const std::optional<int64_t> step = verdicts[*first].step;
  std::vector<size_t> in_step;
  for (size_t n : members) {
    if (verdicts[n].step == step) in_step.push_back(n);
  }
  const auto order = [&](size_t n, bool backward) {
    return step_order(verdicts[n], backward, static_cast<int64_t>(n));
  };
  std::optional<StepOrder> earliest;
  FirstBadCase out;
  for (size_t n : in_step) {
    for (const bool backward : {false, true}) {
      if (!(backward ? verdicts[n].backward_error : verdicts[n].forward_error)) continue;
      const StepOrder when = order(n, backward);
      if (earliest && *earliest <= when) continue;
      earliest = when;
      out.index = n;
      out.from_backward = backward;
    }
  }
  // What the origin poisoned in its micro-batch: the forward of the layers after it (a forward
  // origin) and the gradients of the layers before it, whose backward runs after.
  const CaseOutcome& origin = verdicts[out.index];
  for (size_t n : in_step) {
    const CaseOutcome& v = verdicts[n];
    if (n == out.index || !bad(v) || v.micro_batch != origin.micro_batch) continue;
    const bool before = order(n, false) < order(out.index, false);
    if (before && v.backward_error) out.backward_into.push_back(n);
    if (!before && !out.from_backward && v.forward_error) out.forward_into.push_back(n);
  }
  return out;
}

// Orders origins of different ranks: the step (absent first), then when the origin's side ran
// in it (step_order).
std::tuple<int64_t, StepOrder> position(const std::vector<CaseOutcome>& verdicts,
                                        const FirstBadCase& origin) {
  const CaseOutcome& v = verdicts[origin.index];
  return {v.step.value_or(-1),
          step_order(v, origin.from_backward, static_cast<int64_t>(origin.index))};
}

// The ranks with an error in `step`, and "one_rank" / "some_ranks" / "all_ranks" of `world`.
void set_scope(const std::vector<CaseOutcome>& verdicts, std::optional<int64_t> step, int64_t world,
               FirstBadCase& out) {
  for (const CaseOutcome& v : verdicts) {
    if (v.rank && v.step == step && bad(v) &&
        std::find(out.ranks.begin(), out.ranks.end(), *v.rank) == out.ranks.end()) {
      out.ranks.push_back(*v.rank);
    }
  }
  std::sort(out.ranks.begin(), out.ranks.end());
  const int64_t bad_ranks = static_cast<int64_t>(out.ranks.size());
  out.scope = bad_ranks >= world ? "all_ranks" : bad_ranks == 1 ? "one_rank" : "some_ranks";
}

std::string scope_text(const FirstBadCase& f, const CaseOutcome& origin, int64_t world) {
  const std::string of = std::to_string(world) + " rank" + (world == 1 ? "" : "s");
  if (f.scope == "all_ranks") {
    return "on all " + of + ": something they share (weights, a kernel, the schedule)";
  }
  if (f.scope == "one_rank") {
    return "on rank " + std::to_string(f.ranks.front()) + " only (of " + of + "): " +
           (origin.input_nonfinite ? "its inputs were already non-finite, so its data or a "
                                     "fault local to that rank"
                                   : "a fault local to that rank");
  }
  std::string ranks;
  for (int64_t r : f.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  return "on ranks " + ranks + " of " + of;
}

}  // namespace

CaseOutcome outcome_of(const CaseInfo& info, const std::vector<Finding>& findings,
                       std::optional<int64_t> rank) {
  CaseOutcome v;
  v.nonfinite = nonfinite_sites(findings);
  v.path = info.path;
  v.rank = rank;
  v.step = info.config.step;
  v.micro_batch = info.config.run.micro_batch;
  v.forward_seq = info.config.run.forward_seq;
  v.backward_seq = info.config.run.backward_seq;
  v.layer = info.config.layer;
  for (const Finding& f : findings) {
    if (f.severity != Severity::error) continue;
    const bool backward = is_backward_finding(f);
    if (!(backward ? v.backward_error : v.forward_error)) {
      (backward ? v.backward_lead : v.forward_lead) = f.message;
      (backward ? v.backward_head : v.forward_head) = f.head;
    }
    (backward ? v.backward_error : v.forward_error) = true;
    v.dout_nonfinite =
        v.dout_nonfinite || (f.kind == FindingKind::nonfinite_input && f.tensor == "dO");
    v.input_nonfinite = v.input_nonfinite || (f.kind == FindingKind::nonfinite_input && !backward);
    const std::string kind = finding_kind_name(f.kind);
    if (std::find(v.kinds.begin(), v.kinds.end(), kind) == v.kinds.end()) v.kinds.push_back(kind);
  }
  return v;
}

std::optional<FirstBadCase> first_bad_case(const std::vector<CaseOutcome>& verdicts,
                                           int64_t world_size) {
  // Each rank's cases (one group without ranks), in order of first appearance.
  std::vector<std::optional<int64_t>> ranks;
  std::vector<std::vector<size_t>> groups;
  for (size_t n = 0; n < verdicts.size(); ++n) {
    const size_t group = static_cast<size_t>(
        std::find(ranks.begin(), ranks.end(), verdicts[n].rank) - ranks.begin());
    if (group == ranks.size()) {
      ranks.push_back(verdicts[n].rank);
      groups.emplace_back();
    }
    groups[group].push_back(n);
  }
  std::optional<FirstBadCase> found;
  const std::optional<FirstNonfinite> nonfinite = first_nonfinite(verdicts);
  for (const std::vector<size_t>& group : groups) {
    std::optional<FirstBadCase> origin = origin_among(verdicts, group);
    if (origin && (!found || position(verdicts, *origin) < position(verdicts, *found))) {
      found = std::move(origin);
    }
  }
  if (!found) return std::nullopt;
  FirstBadCase& out = *found;
  out.nonfinite = nonfinite;
  const CaseOutcome& origin = verdicts[out.index];
  for (const CaseOutcome& v : verdicts) {
    if (!bad(v) || !v.step || v.step == origin.step) continue;
    if (std::find(out.later_steps.begin(), out.later_steps.end(), *v.step) ==
        out.later_steps.end()) {
      out.later_steps.push_back(*v.step);
    }
  }
  std::sort(out.later_steps.begin(), out.later_steps.end());
  out.lead = out.from_backward ? origin.backward_lead : origin.forward_lead;
  out.head = out.from_backward ? origin.backward_head : origin.forward_head;
  std::string kinds;
  for (const std::string& k : origin.kinds) kinds += (kinds.empty() ? "" : ", ") + k;
  out.text = place(verdicts, origin, out.head) + ": " + kinds +
             (out.from_backward ? " (started in the backward)" : "");
  if (origin.rank) {
    const int64_t world = std::max(world_size, static_cast<int64_t>(ranks.size()));
    set_scope(verdicts, origin.step, world, out);
    out.text += "; " + scope_text(out, origin, world);
  }
  if (!out.forward_into.empty()) {
    out.text += "; propagates forward into " + list(verdicts, out.forward_into);
  }
  if (!out.backward_into.empty()) {
    out.text += std::string(out.forward_into.empty() ? "; propagates" : ", and") +
                " through dO into the gradients of " + list(verdicts, out.backward_into);
  }
  if (!out.later_steps.empty()) {
    out.text += "; " + std::to_string(out.later_steps.size()) + " later step" +
                (out.later_steps.size() > 1 ? "s also have" : " also has") +
                " errors (first: step " + std::to_string(out.later_steps.front()) + ")";
  }
  return out;
}

std::vector<NonfiniteEvent> nonfinite_events(const std::vector<CaseOutcome>& outcomes) {
  // (step group, step, loose case, order in the step, rank order, case index) of each side that
  // holds a NaN.
  using Key = std::tuple<int, int64_t, int64_t, StepOrder, size_t, size_t>;
  std::vector<std::optional<int64_t>> ranks;  // in order of first appearance
  std::vector<std::pair<Key, NonfiniteEvent>> events;
  for (size_t n = 0; n < outcomes.size(); ++n) {
    const CaseOutcome& v = outcomes[n];
    if (v.nonfinite.empty()) continue;
    auto rank = std::find(ranks.begin(), ranks.end(), v.rank);
    if (rank == ranks.end()) rank = ranks.insert(ranks.end(), v.rank);
    const auto rank_order = static_cast<size_t>(rank - ranks.begin());
    const int64_t loose = !v.step && !v.layer ? static_cast<int64_t>(n) : 0;
    for (const bool backward : {false, true}) {
      NonfiniteEvent e{n, backward, {}, {}};
      for (const NonfiniteSite& s : v.nonfinite) {
        if (is_backward_stage(s.stage) == backward) e.sites.push_back(s);
      }
      if (e.sites.empty()) continue;
      std::string at = place(outcomes, v, -1);
      const size_t paren = at.find(" (");
      at.insert(paren == std::string::npos ? at.size() : paren,
                backward ? ", backward" : ", forward");
      e.place = std::move(at);
      const Key key{v.step ? 0 : 1, v.step.value_or(0),
                    loose,          step_order(v, backward, static_cast<int64_t>(n)),
                    rank_order,     n};
      events.emplace_back(key, std::move(e));
    }
  }
  std::sort(events.begin(), events.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<NonfiniteEvent> out;
  for (auto& [key, e] : events) out.push_back(std::move(e));
  return out;
}

std::optional<FirstNonfinite> first_nonfinite(const std::vector<CaseOutcome>& outcomes) {
  std::vector<NonfiniteEvent> events = nonfinite_events(outcomes);
  if (events.empty()) return std::nullopt;
  const NonfiniteEvent& e = events.front();
  return FirstNonfinite{e.index, e.sites.front(), e.place + ": " + site_text(e.sites.front())};
}

}  // namespace attnscope
