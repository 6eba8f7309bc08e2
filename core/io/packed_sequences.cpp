// One case per packed sequence: expansion of a listing and the cut of a loaded group (see
// packed_sequences.h).
#include "core/io/packed_sequences.h"

#include <algorithm>
#include <cstring>

namespace attnscope {

namespace {

const char* const kStartsHint =
    "cu_seqlens holds the N+1 sequence starts FlashAttention's varlen API takes: 0, len_0, "
    "len_0 + len_1, ..., at most the T tokens of q (k for cu_seqlens_k)";

Error starts_error(const std::string& where, const std::string& problem) {
  return make_error(ErrorCode::format, where + ": " + problem, kStartsHint);
}

// The starts held by index tensor `t` of `group`, checked against the group's `tokens`.
Result<std::vector<int64_t>> read_starts(const DumpSource& source, const CaseInfo& group,
                                         const TensorInfo& t, int64_t tokens,
                                         const std::string& file) {
  Result<HostTensor> stored = source.read_tensor(group, t);
  if (!stored) return stored.error();
  const std::string where = file + ": " + group.path + "/" + t.dataset;
  std::vector<int64_t> starts(static_cast<size_t>(stored->numel()));
  for (size_t i = 0; i < starts.size(); ++i) {
    starts[i] = static_cast<int64_t>(stored->at(static_cast<int64_t>(i)));
  }
  if (starts.front() != 0) {
    return starts_error(where, "starts at " + std::to_string(starts.front()) + ", not 0");
  }
  for (size_t i = 1; i < starts.size(); ++i) {
    if (starts[i] >= starts[i - 1]) continue;
    return starts_error(where, "decreases at entry " + std::to_string(i) + " (" +
                                   std::to_string(starts[i - 1]) + " -> " +
                                   std::to_string(starts[i]) + ")");
  }
  if (starts.back() > tokens) {
    return starts_error(where, "ends at " + std::to_string(starts.back()) + ", beyond the " +
                                   std::to_string(tokens) + " tokens of " +
                                   (t.name == "cu_seqlens_k" ? "k" : "q"));
  }
  return starts;
}

std::string sequence_path(const std::string& group, int64_t index) {
  return (group == "/" ? "" : group) + "/seq_" + std::to_string(index);
}

// The cases of the sequences of packed `group`, or why there are none.
Result<std::vector<CaseInfo>> sequences_of(const DumpSource& source, const CaseInfo& group,
                                           const std::string& file) {
  const int64_t tq = group.dims.seqlen_q, tk = group.dims.seqlen_k;
  auto q_starts = read_starts(source, group, *group.find("cu_seqlens_q"), tq, file);
  if (!q_starts) return q_starts.error();
  std::vector<int64_t> k_starts = *q_starts;
  if (const TensorInfo* ck = group.find("cu_seqlens_k")) {
    auto read = read_starts(source, group, *ck, tk, file);
    if (!read) return read.error();
    k_starts = std::move(*read);
  } else if (tq != tk) {
    return starts_error(file + ": " + group.path,
                        "cu_seqlens_k is missing, and k holds " + std::to_string(tk) +
                            " tokens where q holds " + std::to_string(tq));
  }
  if (k_starts.size() != q_starts->size()) {
    return starts_error(file + ": " + group.path + "/cu_seqlens_k",
                        "gives " + std::to_string(k_starts.size() - 1) + " sequences, " +
                            "cu_seqlens_q " + std::to_string(q_starts->size() - 1));
  }
  CaseInfo base = group;
  base.tensors.erase(std::remove_if(base.tensors.begin(), base.tensors.end(),
                                    [](const TensorInfo& t) { return is_index_tensor(t.name); }),
                     base.tensors.end());
  const auto count = static_cast<int64_t>(q_starts->size()) - 1;
  std::vector<CaseInfo> out;
  for (int64_t i = 0; i < count; ++i) {
    const auto at = static_cast<size_t>(i);
    PackedSequence p{
        group.path,       i,  count, (*q_starts)[at], (*q_starts)[at + 1], k_starts[at],
        k_starts[at + 1], tq, tk};
    if (p.q_end == p.q_begin) continue;
    if (p.k_end == p.k_begin) {
      return starts_error(file + ": " + group.path + "/cu_seqlens_k",
                          "sequence " + std::to_string(i) + " has " +
                              std::to_string(p.q_end - p.q_begin) + " queries and no keys");
    }
    CaseInfo c = base;
    c.path = sequence_path(group.path, i);
    c.dims.seqlen_q = p.q_end - p.q_begin;
    c.dims.seqlen_k = p.k_end - p.k_begin;
    c.packed = std::move(p);
    out.push_back(std::move(c));
  }
  return out;
}

// Rows [begin, end) of dim `axis` of `t`.
HostTensor slice_axis(const HostTensor& t, size_t axis, int64_t begin, int64_t end) {
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(t.dtype));
  for (size_t d = 0; d < axis; ++d) outer *= t.shape[d];
  for (size_t d = axis + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
  HostTensor out;
  out.dtype = t.dtype;
  out.shape = t.shape;
  out.shape[axis] = end - begin;
  const int64_t rows = t.shape[axis], kept = end - begin;
  out.bytes.resize(static_cast<size_t>(outer * kept * inner));
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(out.bytes.data() + o * kept * inner, t.bytes.data() + (o * rows + begin) * inner,
                static_cast<size_t>(kept * inner));
  }
  return out;
}

// Keys of other sequences that score tensor `t` ([b, h, Tq | 1, Tk | 1]) lets the queries of
// `p` attend; `attend` tells an element that attends.
template <typename Attends>
CaseData::CrossSequenceLeak count_leak(const HostTensor& t, const PackedSequence& p,
                                       Attends attends) {
  CaseData::CrossSequenceLeak leak;
  const int64_t sq = t.shape[2], sk = t.shape[3], slices = t.shape[0] * t.shape[1];
  const int64_t lq = p.q_end - p.q_begin, lk = p.k_end - p.k_begin;
  const int64_t row_begin = sq == 1 ? 0 : p.q_begin, row_end = sq == 1 ? 1 : p.q_end;
  const int64_t weight = sq == 1 ? lq : 1;  // query rows one stored row stands for
  for (int64_t s = 0; s < slices; ++s) {
    for (int64_t r = row_begin; r < row_end; ++r) {
      const int64_t row = (s * sq + r) * sk;
      int64_t leaked = 0, first = -1;
      if (sk == 1) {
        if (attends(row)) {
          leaked = p.total_k - lk;
          first = p.k_begin > 0 ? 0 : p.k_end;
        }
      } else {
        for (int64_t c = 0; c < sk; ++c) {
          if ((c >= p.k_begin && c < p.k_end) || !attends(row + c)) continue;
          if (first < 0) first = c;
          ++leaked;
        }
      }
      if (leaked == 0) continue;
      if (leak.first_row < 0) {
        leak.first_row = sq == 1 ? 0 : r - p.q_begin;
        leak.first_key = first;
      }
      leak.rows += weight;
      leak.entries += leaked * weight;
    }
  }
  return leak;
}

}  // namespace

void expand_packed_cases(const DumpSource& source, const std::string& file, DumpListing& listing) {
  const auto packed = [](const CaseInfo& c) { return c.has("cu_seqlens_q"); };
  if (std::none_of(listing.cases.begin(), listing.cases.end(), packed)) return;  // no copy
  std::vector<CaseInfo> cases;
  for (CaseInfo& c : listing.cases) {
    if (!packed(c)) {
      cases.push_back(std::move(c));
      continue;
    }
    Result<std::vector<CaseInfo>> sequences = sequences_of(source, c, file);
    if (!sequences) {
      listing.rejected.push_back(sequences.error());
      continue;
    }
    for (CaseInfo& s : *sequences) cases.push_back(std::move(s));
  }
  listing.cases = std::move(cases);
  sort_cases(listing.cases);
}

CaseDims stored_dims(const CaseInfo& info) {
  CaseDims d = info.dims;
  if (info.packed) {
    d.seqlen_q = info.packed->total_q;
    d.seqlen_k = info.packed->total_k;
  }
  return d;
}

void cut_packed_sequence(CaseData& data) {
  const PackedSequence& p = *data.info.packed;
  for (const char* name : {"mask", "bias"}) {
    const HostTensor* t = data.find(name);
    if (t == nullptr || data.leak) continue;
    const bool inverted = data.info.config.run.mask_convention == "masked_out";
    CaseData::CrossSequenceLeak leak =
        std::string(name) == "mask"
            ? count_leak(*t, p, [&](int64_t i) { return (t->at(i) != 0) != inverted; })
            : count_leak(*t, p, [&](int64_t i) { return !(t->at(i) <= kMaskingBias); });
    leak.tensor = name;
    if (leak.entries > 0) data.leak = std::move(leak);
  }
  for (auto& [name, t] : data.tensors) {
    if (is_score_tensor(name)) {
      if (t.shape[2] > 1) t = slice_axis(t, 2, p.q_begin, p.q_end);
      if (t.shape[3] > 1) t = slice_axis(t, 3, p.k_begin, p.k_end);
    } else if (name == "k" || name == "v" || name == "dk" || name == "dv") {
      t = slice_axis(t, 2, p.k_begin, p.k_end);
    } else if (is_sequence_tensor(name) || name == "lse") {
      t = slice_axis(t, 2, p.q_begin, p.q_end);
    }
  }
}

}  // namespace attnscope
