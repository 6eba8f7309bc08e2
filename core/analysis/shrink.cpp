// Delta debugging of a case to the smallest part that still shows a finding (shrink.h).
#include "core/analysis/shrink.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

namespace attnscope {
namespace {

using Clock = std::chrono::steady_clock;
using Indices = std::vector<int64_t>;

Indices iota(int64_t n) {
  Indices v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

// t [d0, d1, d2, d3] (rank 4) or [d0, d1, d2] (rank 3) gathered at idx[dim] along each dim;
// a null entry, or a dim of size 1 (broadcast), keeps the dim whole.
HostTensor gather(const HostTensor& t, const std::array<const Indices*, 4>& idx) {
  const size_t rank = t.shape.size();
  std::vector<Indices> pick(rank);
  for (size_t d = 0; d < rank; ++d) {
    pick[d] = (idx[d] == nullptr || t.shape[d] == 1) ? iota(t.shape[d]) : *idx[d];
  }
  HostTensor out;
  out.dtype = t.dtype;
  for (const Indices& p : pick) out.shape.push_back(static_cast<int64_t>(p.size()));
  const size_t esize = dtype_size(t.dtype);
  out.bytes.resize(static_cast<size_t>(out.numel()) * esize);
  std::vector<int64_t> stride(rank, 1);
  for (size_t d = rank - 1; d > 0; --d) stride[d - 1] = stride[d] * t.shape[d];
  // Every index but the last, then a run of the last dim's picks.
  std::vector<size_t> at(rank, 0);
  uint8_t* dst = out.bytes.data();
  const Indices& last = pick[rank - 1];
  while (true) {
    int64_t base = 0;
    for (size_t d = 0; d + 1 < rank; ++d) base += pick[d][at[d]] * stride[d];
    for (int64_t j : last) {
      std::memcpy(dst, t.bytes.data() + static_cast<size_t>(base + j) * esize, esize);
      dst += esize;
    }
    size_t d = rank - 1;
    while (d > 0) {
      --d;
      if (++at[d] < pick[d].size()) break;
      at[d] = 0;
      if (d == 0) return out;
    }
    if (rank == 1) return out;
  }
}

bool is_prefix(const Indices& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Classic ddmin (Zeller): the smallest subset of `items` (1-minimal within the budget) for
// which `holds` stays true; `items` itself must hold.
Indices ddmin(Indices items, const std::function<bool(const Indices&)>& holds,
              const std::function<bool()>& spent) {
  size_t n = 2;
  while (items.size() >= 2 && !spent()) {
    const size_t chunk = (items.size() + n - 1) / n;
    bool reduced = false;
    for (size_t start = 0; start < items.size() && !reduced && !spent(); start += chunk) {
      const size_t end = std::min(items.size(), start + chunk);
      Indices part(items.begin() + static_cast<long>(start),
                   items.begin() + static_cast<long>(end));
      if (part.size() < items.size() && holds(part)) {
        items = std::move(part);
        n = 2;
        reduced = true;
        break;
      }
      if (n == 2) continue;  // with two parts the complement is the other part
      Indices rest(items.begin(), items.begin() + static_cast<long>(start));
      rest.insert(rest.end(), items.begin() + static_cast<long>(end), items.end());
      if (holds(rest)) {
        items = std::move(rest);
        n = std::max<size_t>(n - 1, 2);
        reduced = true;
      }
    }
    if (reduced) continue;
    if (n >= items.size()) break;
    n = std::min(items.size(), n * 2);
  }
  return items;
}

}  // namespace

CaseData select_case(const CaseData& data, const CaseSelection& s) {
  const CaseDims& dims = data.info.dims;
  const int64_t group = dims.heads / dims.kv_heads;
  Indices heads;
  for (int64_t kv : s.kv_heads) {
    for (int64_t g = 0; g < group; ++g) heads.push_back(kv * group + g);
  }
  const bool all_keys = static_cast<int64_t>(s.keys.size()) == dims.seqlen_k && is_prefix(s.keys);
  const bool all_rows = static_cast<int64_t>(s.rows.size()) == dims.seqlen_q && is_prefix(s.rows);
  // A causal case keeps a prefix of rows and the keys they see (select's callers ensure it).
  const bool rows_see_kept_keys =
      all_keys || (data.info.config.causal && is_prefix(s.rows) && is_prefix(s.keys));
  CaseData out;
  out.info = data.info;
  out.info.packed.reset();
  out.info.config.layout = Layout::bhsd;
  CaseDims& d = out.info.dims;
  d.batch = static_cast<int64_t>(s.batches.size());
  d.heads = static_cast<int64_t>(heads.size());
  d.kv_heads = static_cast<int64_t>(s.kv_heads.size());
  d.seqlen_q = static_cast<int64_t>(s.rows.size());
  d.seqlen_k = static_cast<int64_t>(s.keys.size());
  d.q_broadcast = d.kv_broadcast = false;
  const bool broadcast = dims.q_broadcast || dims.kv_broadcast;  // summed recorded gradients
  for (const auto& [name, t] : data.tensors) {
    const bool query_side = name == "q" || name == "do" || name == "o" || name == "dq";
    const bool key_side = name == "k" || name == "v" || name == "dk" || name == "dv";
    if (name == "o" || name == "lse" || name == "dq") {
      if (!rows_see_kept_keys || (name == "dq" && dims.q_broadcast)) continue;
    } else if (name == "dk" || name == "dv") {
      if (!all_rows || !all_keys || broadcast) continue;
    } else if (is_index_tensor(name)) {
      continue;
    }
    if (query_side) {
      out.tensors[name] = gather(t, {&s.batches, &heads, &s.rows, nullptr});
    } else if (key_side) {
      out.tensors[name] = gather(t, {&s.batches, &s.kv_heads, &s.keys, nullptr});
    } else if (name == "lse") {
      out.tensors[name] = gather(t, {&s.batches, &heads, &s.rows, nullptr});
    } else {  // mask, bias, dropout_mask: [B|1, H|1, Sq|1, Sk|1]
      out.tensors[name] = gather(t, {&s.batches, &heads, &s.rows, &s.keys});
    }
  }
  out.info.tensors.clear();
  for (const char* name : kTensorNames) {
    const auto it = out.tensors.find(name);
    if (it == out.tensors.end()) continue;
    out.info.tensors.push_back({name, name, it->second.dtype, it->second.shape});
  }
  // The leak of a packed sequence lives in the group's mask, which the case no longer holds.
  out.leak.reset();
  return out;
}

int64_t case_elements(const CaseData& data) {
  int64_t n = 0;
  for (const auto& [name, t] : data.tensors) n += t.numel();
  return n;
}

const Finding* find_target(const std::vector<Finding>& findings, FindingKind kind,
                           const std::string& tensor) {
  for (const Finding& f : findings) {
    if (f.kind == kind && !f.what_if && (tensor.empty() || f.tensor == tensor)) return &f;
  }
  return nullptr;
}

bool reproducible_kind(FindingKind kind) {
  return kind != FindingKind::cross_sequence_attention && kind != FindingKind::replay_inexact;
}

Result<ShrinkResult> shrink_case(const CaseData& data, const ShrinkTarget& target,
                                 const ShrinkOptions& options, const CaseAnalysis* whole) {
  ShrinkResult r;
  std::optional<Result<CaseAnalysis>> own;
  if (whole == nullptr) {
    own.emplace(analyze_case(data, options.analysis));
    ++r.tries;
    if (!*own) return own->error();
    whole = &own->value();
  }
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(options.budget);
  const bool recorded_kind = target.kind == FindingKind::recorded_mismatch ||
                             target.kind == FindingKind::recorded_convention;
  // The candidates' analyses run only the checks the target comes from (a real-size case's
  // fp64 reference for the recorded outputs costs most of an analysis).
  AnalysisSettings settings = options.analysis;
  settings.cancelled = [deadline] { return Clock::now() > deadline; };
  settings.recorded_check = recorded_kind;
  settings.precision_check = target.kind == FindingKind::precision_loss;
  settings.infer_run = false;  // the whole case's inference is applied to each part (cut)
  const auto spent = [&] { return Clock::now() > deadline; };

  std::vector<FindingKind> kinds;  // of the whole case
  // The analysis of a candidate; the finding it shows, if it does.
  std::optional<Finding> shown;
  const auto shows = [&](const CaseData& candidate) {
    ++r.tries;
    Result<CaseAnalysis> a = analyze_case(candidate, settings);
    if (!a || a->interrupted) return false;
    const Finding* f = find_target(a->findings, target.kind, target.tensor);
    if (f == nullptr) return false;
    // No slipping into another failure: every kind the candidate shows, the case showed.
    for (const Finding& other : a->findings) {
      if (std::find(kinds.begin(), kinds.end(), other.kind) == kinds.end()) return false;
    }
    shown = *f;
    return true;
  };
  const CaseDims& dims = data.info.dims;
  CaseSelection sel{iota(dims.batch), iota(dims.kv_heads), iota(dims.seqlen_q),
                    iota(dims.seqlen_k)};
  r.original_elements = case_elements(data);
  const Finding* found =
      whole->interrupted ? nullptr : find_target(whole->findings, target.kind, target.tensor);
  if (found == nullptr) {
    return make_error(ErrorCode::not_found,
                      std::string("the case does not show ") + finding_kind_name(target.kind) +
                          (target.tensor.empty() ? "" : " on " + target.tensor) + " as recorded",
                      "attnscope-cli scan FILE::CASE lists its findings; pass one of their kinds "
                      "with --finding");
  }
  for (const Finding& f : whole->findings) kinds.push_back(f.kind);
  // A part of the case: what the whole case's analysis inferred from the recorded o (scale,
  // mask fill) becomes its recorded semantics, as it may lose the o it was read off.
  const auto cut = [&](const CaseSelection& s) {
    CaseData part = select_case(data, s);
    apply_inferred_run(part.info.config, whole->replay.inferred);
    return part;
  };
  std::optional<Finding> best = *found;
  const auto try_sel = [&](const CaseSelection& candidate) {
    if (spent()) return false;
    if (!shows(cut(candidate))) return false;
    best = shown;
    return true;
  };
  const auto reduce = [&](Indices CaseSelection::*field, int64_t hint) {
    if (hint >= 0 && (sel.*field).size() > 1) {
      CaseSelection one = sel;
      one.*field = {hint};
      if (try_sel(one)) {
        sel = std::move(one);
        return;
      }
    }
    sel.*field = ddmin(
        sel.*field,
        [&](const Indices& part) {
          CaseSelection c = sel;
          c.*field = part;
          return try_sel(c);
        },
        spent);
  };
  const int64_t group = dims.heads / dims.kv_heads;
  reduce(&CaseSelection::batches, target.batch);
  if (recorded_kind && group > 1) {
    r.notes.push_back("all " + std::to_string(dims.kv_heads) +
                      " kv groups: a recorded output of a GQA case can be off by a head-mapping "
                      "error, which moves query heads between any groups");
  } else {
    reduce(&CaseSelection::kv_heads, target.head >= 0 ? target.head / group : -1);
    if (group > 1) {
      r.notes.push_back("whole GQA groups: each kept kv head keeps its " + std::to_string(group) +
                        " query heads, so the head mapping stays as recorded");
    }
  }
  if (recorded_kind) {
    r.notes.push_back("all " + std::to_string(dims.seqlen_q) + " query rows and " +
                      std::to_string(dims.seqlen_k) +
                      " keys: the finding compares recorded outputs, which only stay exact "
                      "with every row and key, and the recorded kernel's result can depend on "
                      "its tiling (a length's residue mod 64 or 128)");
  } else if (data.info.config.causal) {
    // Row i sees keys 0 .. i + offset, offset = Sk - Sq (bottom-right) or 0 (top-left): rows
    // 0..L-1 with keys 0..L-1+offset keep that in the cut case under either alignment. The
    // shortest L whose rows still show the finding, by bisection.
    const int64_t offset = data.info.config.causal_align == CausalAlign::bottom_right
                               ? dims.seqlen_k - dims.seqlen_q
                               : 0;
    const auto prefix = [&](int64_t rows) {
      CaseSelection c = sel;
      c.rows = iota(rows);
      c.keys = iota(std::clamp<int64_t>(rows + offset, 1, dims.seqlen_k));
      return c;
    };
    if (offset >= 0) {
      int64_t lo = 1, hi = dims.seqlen_q;  // hi holds
      while (lo < hi && !spent()) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (try_sel(prefix(mid))) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      if (hi < dims.seqlen_q) sel = prefix(hi);
      r.notes.push_back("query rows 0.." + std::to_string(sel.rows.size() - 1) + " and keys 0.." +
                        std::to_string(sel.keys.size() - 1) +
                        " as prefixes: the case is causal, so each kept row keeps every key it "
                        "attended");
    } else {
      r.notes.push_back(
          "all rows and keys: a bottom-right causal case with Sq > Sk is not cut (its first "
          "rows see no key, and prefixes would move the alignment)");
    }
  } else {
    reduce(&CaseSelection::rows, target.rows.valid() ? target.rows.first : -1);
    reduce(&CaseSelection::keys, -1);
  }
  if (!recorded_kind && (static_cast<int64_t>(sel.rows.size()) < dims.seqlen_q ||
                         static_cast<int64_t>(sel.keys.size()) < dims.seqlen_k)) {
    r.notes.push_back(
        "no sequence length kept: the finding follows from the values (the replay "
        "shows it at Sq = " +
        std::to_string(sel.rows.size()) + ", Sk = " + std::to_string(sel.keys.size()) +
        "), not from a kernel's tiling");
  }
  r.kept = sel;
  r.minimal = cut(sel);
  // Values: the NaN / Inf of an input that the failure does not need become 0, so that the
  // reproducer shows the one that matters (a NaN dO of a poisoned run hides nothing then).
  for (const char* name : {"do", "bias", "q", "k", "v"}) {
    const auto it = r.minimal.tensors.find(name);
    if (it == r.minimal.tensors.end() || spent()) continue;
    std::vector<double> x = it->second.to_double();
    int64_t zeroed = 0;
    for (double& e : x) {
      if (!std::isfinite(e)) {
        e = 0;
        ++zeroed;
      }
    }
    if (zeroed == 0) continue;
    CaseData candidate = r.minimal;
    candidate.tensors[name] = HostTensor::from_double(it->second.dtype, it->second.shape, x);
    if (!shows(candidate)) continue;
    best = shown;
    r.minimal = std::move(candidate);
    r.notes.push_back(std::string(name) + ": its " + std::to_string(zeroed) +
                      " non-finite value(s) set to 0, which the failure does not need");
  }
  r.minimal_elements = case_elements(r.minimal);
  r.finding = *best;
  r.budget_spent = spent();
  return r;
}

}  // namespace attnscope
