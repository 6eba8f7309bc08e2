// Case model: layout names, shape validation (infer_case_dims), canonical-layout conversion and
// the case ordering shared by every dump format.
#include "case_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <numeric>
#include <tuple>

namespace attnscope {

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::bhsd:
      return "BHSD";
    case Layout::bshd:
      return "BSHD";
    case Layout::hsd:
      return "HSD";
    case Layout::sd:
      return "SD";
    case Layout::thd:
      return "THD";
  }
  return "BHSD";
}

std::optional<Layout> parse_layout(const std::string& text) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (Layout l : {Layout::bhsd, Layout::bshd, Layout::hsd, Layout::sd, Layout::thd}) {
    if (upper == layout_name(l)) return l;
  }
  return std::nullopt;
}

const char* canonical_tensor_name(const std::string& dataset) {
  if (dataset == "dout" || dataset == "grad_out") return "do";
  if (dataset == "attn_bias") return "bias";
  if (dataset == "cu_seqlens") return "cu_seqlens_q";
  for (const char* name : kTensorNames) {
    if (dataset == name) return name;
  }
  return nullptr;
}

bool is_sequence_tensor(const std::string& name) {
  return name == "q" || name == "k" || name == "v" || name == "do" || name == "o" || name == "dq" ||
         name == "dk" || name == "dv";
}

bool is_score_tensor(const std::string& name) {
  return name == "mask" || name == "bias" || name == "dropout_mask";
}

bool is_bool_tensor(const std::string& name) {
  return name == "mask" || name == "dropout_mask";
}

bool is_index_tensor(const std::string& name) {
  return name == "cu_seqlens_q" || name == "cu_seqlens_k";
}

bool PackedSequence::operator==(const PackedSequence& o) const {
  return group == o.group && index == o.index && count == o.count && q_begin == o.q_begin &&
         q_end == o.q_end && k_begin == o.k_begin && k_end == o.k_end && total_q == o.total_q &&
         total_k == o.total_k;
}

double CaseConfig::effective_scale(int64_t head_dim) const {
  if (scale) return *scale;
  return head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0;
}

const TensorInfo* CaseInfo::find(const std::string& name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const HostTensor* CaseData::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

Layout layout_for_rank(size_t rank, Layout declared) {
  if (rank == 3) return declared == Layout::thd ? Layout::thd : Layout::hsd;
  if (rank == 2) return Layout::sd;
  return declared == Layout::bshd ? Layout::bshd : Layout::bhsd;
}

Layout case_layout(const std::vector<TensorInfo>& tensors, Layout declared) {
  size_t rank = 4;
  bool packed = false;
  for (const TensorInfo& t : tensors) {
    if (t.name == "q") rank = t.shape.size();
    packed = packed || is_index_tensor(t.name);
  }
  return layout_for_rank(rank, packed && rank == 3 ? Layout::thd : declared);
}

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  HostTensor t;
  t.shape = shape;
  return t.shape_string();
}

// (B, H, S, D) of a q/k/v-like tensor stored in `layout`; the rank is checked by the caller.
struct Bhsd {
  int64_t b, h, s, d;
};

Bhsd bhsd_of(const std::vector<int64_t>& s, Layout layout) {
  switch (layout) {
    case Layout::bhsd:
      return {s[0], s[1], s[2], s[3]};
    case Layout::bshd:
      return {s[0], s[2], s[1], s[3]};
    case Layout::hsd:
      return {1, s[0], s[1], s[2]};
    case Layout::sd:
      return {1, 1, s[0], s[1]};
    case Layout::thd:
      return {1, s[1], s[0], s[2]};
  }
  return {};
}

// Stored shape of a tensor whose canonical BHSD sizes are `x`.
std::vector<int64_t> stored_shape(Bhsd x, Layout layout) {
  switch (layout) {
    case Layout::bhsd:
      return {x.b, x.h, x.s, x.d};
    case Layout::bshd:
      return {x.b, x.s, x.h, x.d};
    case Layout::hsd:
      return {x.h, x.s, x.d};
    case Layout::sd:
      return {x.s, x.d};
    case Layout::thd:
      return {x.s, x.h, x.d};
  }
  return {};
}

size_t layout_rank(Layout layout) {
  return layout == Layout::sd ? 2 : layout == Layout::hsd || layout == Layout::thd ? 3 : 4;
}

Error shape_error(const std::string& where, const TensorInfo& t, const std::string& problem) {
  return make_error(ErrorCode::format, where + "/" + t.dataset + ": " + problem,
                    "shapes follow DESIGN §2: q [B,H,Sq,D], k [B,Hk,Sk,D], v [B,Hk,Sk,Dv] "
                    "(layout BHSD; BSHD swaps S and H)");
}

std::optional<Error> check_dtype(const TensorInfo& t, const std::string& where) {
  if (is_index_tensor(t.name)) {
    if (t.dtype == DType::i32 || t.dtype == DType::i64) return std::nullopt;
    return make_error(ErrorCode::format,
                      where + "/" + t.dataset + ": " + t.name + " has element type " +
                          dtype_name(t.dtype) + ", expected int32 or int64",
                      "store the sequence starts as FlashAttention takes them (torch.int32)");
  }
  const bool is_mask = is_bool_tensor(t.name);
  const bool boolean = t.dtype == DType::u8 || t.dtype == DType::boolean;
  if (is_mask ? boolean : dtype_is_float(t.dtype)) return std::nullopt;
  if (is_mask) {
    return make_error(ErrorCode::format,
                      where + "/" + t.dataset + ": " + t.name + " has element type " +
                          dtype_name(t.dtype) + ", expected bool or uint8",
                      "store a float mask as 'bias' (0 / -inf), or a boolean mask as bool");
  }
  return make_error(
      ErrorCode::format,
      where + "/" + t.dataset + ": element type " + dtype_name(t.dtype) +
          " where floats are expected",
      "re-export " + t.dataset + " with h5py as float16/float32 (bfloat16 as uint16 + attribute)");
}

// Checks that `t` (rank `rank`) equals `expected` (given in canonical BHSD sizes).
std::optional<Error> expect_shape(const TensorInfo& t, const std::vector<int64_t>& expected,
                                  const std::string& what, const std::string& where) {
  if (t.shape == expected) return std::nullopt;
  return shape_error(
      where, t,
      "shape " + shape_text(t.shape) + " does not match " + what + " " + shape_text(expected));
}

// Numpy-style broadcasting of `t` (rank <= 4) to `target`, right-aligned.
std::optional<Error> expect_broadcastable(const TensorInfo& t, const std::vector<int64_t>& target,
                                          const std::string& where) {
  bool ok = t.shape.size() <= target.size();
  for (size_t i = 0; ok && i < t.shape.size(); ++i) {
    const int64_t dim = t.shape[t.shape.size() - 1 - i];
    ok = dim == 1 || dim == target[target.size() - 1 - i];
  }
  if (ok) return std::nullopt;
  return shape_error(where, t,
                     "shape " + shape_text(t.shape) + " is not broadcastable to [B,H,Sq,Sk] " +
                         shape_text(target));
}

}  // namespace

Result<CaseDims> infer_case_dims(const std::vector<TensorInfo>& tensors, Layout layout,
                                 const std::string& where) {
  auto find = [&](const char* name) -> const TensorInfo* {
    for (const TensorInfo& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  };
  const TensorInfo* q = find("q");
  const TensorInfo* k = find("k");
  const TensorInfo* v = find("v");
  for (const char* name : {"q", "k", "v"}) {
    if (find(name) == nullptr) {
      return make_error(ErrorCode::format, where + ": dataset '" + name + "' is missing",
                        "a case is a group with datasets q, k and v");
    }
  }
  for (const TensorInfo& t : tensors) {
    if (auto e = check_dtype(t, where)) return *e;
  }
  if (q->shape.size() < 2 || q->shape.size() > 4) {
    return shape_error(where, *q,
                       "rank " + std::to_string(q->shape.size()) + " " + shape_text(q->shape) +
                           ", expected 4-D [B,H,S,D] / [B,S,H,D], 3-D [H,S,D] or 2-D [S,D]");
  }
  layout = case_layout(tensors, layout);
  const size_t rank = layout_rank(layout);
  for (const TensorInfo& t : tensors) {
    if (!is_sequence_tensor(t.name) || t.shape.size() == rank) continue;
    return shape_error(where, t,
                       "rank " + std::to_string(t.shape.size()) + " " + shape_text(t.shape) +
                           " differs from q " + shape_text(q->shape) + " (layout " +
                           layout_name(layout) + ")");
  }
  for (const TensorInfo* t : {q, k, v}) {
    for (int64_t d : t->shape) {
      if (d > 0) continue;
      return shape_error(where, *t, "shape " + shape_text(t->shape) + " has an empty dimension");
    }
  }
  const Bhsd qd = bhsd_of(q->shape, layout), kd = bhsd_of(k->shape, layout),
             vd = bhsd_of(v->shape, layout);
  auto mismatch = [&](const TensorInfo& t, const char* what, int64_t got, int64_t want) {
    return shape_error(where, t,
                       std::string(what) + " " + std::to_string(got) + " in " +
                           shape_text(t.shape) + " does not match " + std::to_string(want) +
                           " in q " + shape_text(q->shape));
  };
  const bool q_broadcast = qd.b == 1 && kd.b > 1, kv_broadcast = kd.b == 1 && qd.b > 1;
  if (kd.b != qd.b && !q_broadcast && !kv_broadcast) return mismatch(*k, "batch B", kd.b, qd.b);
  if (vd.b != kd.b) {
    return shape_error(where, *v,
                       "batch B " + std::to_string(vd.b) + " in " + shape_text(v->shape) +
                           " does not match " + std::to_string(kd.b) + " in k " +
                           shape_text(k->shape));
  }
  if (kd.d != qd.d) return mismatch(*k, "head_dim D", kd.d, qd.d);
  if (qd.h % kd.h != 0) {
    return shape_error(where, *k,
                       "kv heads Hk " + std::to_string(kd.h) + " in " + shape_text(k->shape) +
                           " do not divide the query heads H " + std::to_string(qd.h) + " in q " +
                           shape_text(q->shape));
  }
  if (vd.h != kd.h || vd.s != kd.s) {
    return shape_error(
        where, *v,
        "heads/seqlen of " + shape_text(v->shape) + " do not match k " + shape_text(k->shape));
  }
  const int64_t batch = std::max(qd.b, kd.b);
  CaseDims dims{batch, qd.h, kd.h, qd.s, kd.s, qd.d, vd.d, q_broadcast, kv_broadcast};
  const std::vector<int64_t> out_shape = stored_shape({batch, qd.h, qd.s, vd.d}, layout);
  std::vector<int64_t> lse_shape = {batch, qd.h, qd.s};
  lse_shape.erase(lse_shape.begin(), lse_shape.begin() + static_cast<long>(4 - rank));
  const std::vector<int64_t> scores = {batch, qd.h, qd.s, kd.s};
  for (const TensorInfo& t : tensors) {
    std::optional<Error> e;
    if (t.name == "do" || t.name == "o") e = expect_shape(t, out_shape, "[B,H,Sq,Dv]", where);
    if (t.name == "dq") e = expect_shape(t, q->shape, "q", where);
    if (t.name == "dk") e = expect_shape(t, k->shape, "k", where);
    if (t.name == "dv") e = expect_shape(t, v->shape, "v", where);
    if (t.name == "lse" && !lse_sequence_major(t.shape, dims)) {
      e = expect_shape(t, lse_shape, "[B,H,Sq] (or [B,Sq,H])", where);
    }
    if (is_score_tensor(t.name)) e = expect_broadcastable(t, scores, where);
    if (is_index_tensor(t.name) && (t.shape.size() != 1 || t.shape[0] < 2)) {
      e = shape_error(where, t,
                      "shape " + shape_text(t.shape) + " is not [N+1] sequence starts (N >= 1)");
    }
    if (is_index_tensor(t.name) && layout != Layout::thd && (rank != 4 || batch != 1)) {
      e = shape_error(where, t,
                      "sequence starts need packed tensors: q [T,H,D] (layout THD) or one "
                      "batch row [1,H,T,D] / [1,T,H,D], not " +
                          std::string(layout_name(layout)) + " " + shape_text(q->shape));
    }
    if (e) return *e;
  }
  return dims;
}

namespace {

// Swaps dims 1 and 2 of a rank-4 tensor ([B,X,Y,D] -> [B,Y,X,D]), any element size.
HostTensor swap_dims_12(const HostTensor& in) {
  HostTensor out;
  out.dtype = in.dtype;
  const auto& s = in.shape;
  out.shape = {s[0], s[2], s[1], s[3]};
  out.bytes.resize(in.bytes.size());
  const size_t row = static_cast<size_t>(s[3]) * dtype_size(in.dtype);
  for (int64_t b = 0; b < s[0]; ++b) {
    for (int64_t x = 0; x < s[1]; ++x) {
      for (int64_t y = 0; y < s[2]; ++y) {
        const size_t src = static_cast<size_t>((b * s[1] + x) * s[2] + y) * row;
        const size_t dst = static_cast<size_t>((b * s[2] + y) * s[1] + x) * row;
        std::memcpy(out.bytes.data() + dst, in.bytes.data() + src, row);
      }
    }
  }
  return out;
}

// Pads the shape with leading 1s up to `rank` (no data movement).
HostTensor pad_leading(HostTensor t, size_t rank) {
  while (t.shape.size() < rank) t.shape.insert(t.shape.begin(), 1);
  return t;
}

// Drops leading dims until `rank` is reached; they must be 1 (checked by the writers).
HostTensor drop_leading(HostTensor t, size_t rank) {
  while (t.shape.size() > rank && t.shape.front() == 1) t.shape.erase(t.shape.begin());
  return t;
}

}  // namespace

bool lse_sequence_major(const std::vector<int64_t>& shape, const CaseDims& d) {
  if (d.heads == d.seqlen_q || shape.size() < 2) return false;
  const bool batched = shape.size() == 3;
  return (!batched || shape[0] == d.batch) && shape[shape.size() - 2] == d.seqlen_q &&
         shape.back() == d.heads && shape.size() <= 3;
}

HostTensor to_canonical(const std::string& name, const HostTensor& stored, Layout layout,
                        const CaseDims& dims) {
  if (is_score_tensor(name)) return pad_leading(stored, 4);
  if (name == "lse" && lse_sequence_major(stored.shape, dims)) {
    // [.., Sq, H] -> [B, H, Sq] through the rank-4 swap of dims 1 and 2 ([B, Sq, H, 1]).
    HostTensor t = pad_leading(stored, 3);
    t.shape.push_back(1);
    t = swap_dims_12(t);
    t.shape.pop_back();
    return t;
  }
  if (name == "lse") return pad_leading(stored, 3);
  if (!is_sequence_tensor(name)) return stored;
  if (layout == Layout::bshd && stored.shape.size() == 4) return swap_dims_12(stored);
  if (layout == Layout::thd && stored.shape.size() == 3)
    return swap_dims_12(pad_leading(stored, 4));
  return pad_leading(stored, 4);
}

HostTensor from_canonical(const std::string& name, const HostTensor& canonical, Layout layout) {
  if (is_score_tensor(name)) return canonical;
  const size_t rank = layout_rank(layout);
  if (name == "lse") return drop_leading(canonical, rank - 1);
  if (!is_sequence_tensor(name)) return canonical;
  if (layout == Layout::bshd && canonical.shape.size() == 4) return swap_dims_12(canonical);
  if (layout == Layout::thd && canonical.shape.size() == 4) {
    return drop_leading(swap_dims_12(canonical), rank);
  }
  return drop_leading(canonical, rank);
}

void apply_inferred_run(CaseConfig& config, const InferredRun& inferred) {
  if (inferred.mask_fill) config.run.inferred.mask_fill = inferred.mask_fill;
  if (inferred.scale) {
    config.scale = inferred.scale;
    config.run.inferred.scale = inferred.scale;
  }
}

void expand_broadcast_batch(CaseData& data) {
  const CaseDims& d = data.info.dims;
  for (const char* name : {"q", "k", "v"}) {
    if (!d.batch_repeated(name)) continue;
    HostTensor& t = data.tensors.at(name);
    if (t.shape.size() != 4 || t.shape.front() != 1) continue;
    const size_t one = t.bytes.size();
    std::vector<uint8_t> bytes(one * static_cast<size_t>(d.batch));
    for (int64_t b = 0; b < d.batch; ++b) {
      std::memcpy(bytes.data() + static_cast<size_t>(b) * one, t.bytes.data(), one);
    }
    t.bytes = std::move(bytes);
    t.shape.front() = d.batch;
  }
}

namespace {

// Compares two strings naturally: digit runs by numeric value (any length), the rest by bytes.
int natural_compare(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && digit(a[ie])) ++ie;
      while (je < b.size() && digit(b[je])) ++je;
      size_t is = i, js = j;
      while (is + 1 < ie && a[is] == '0') ++is;
      while (js + 1 < je && b[js] == '0') ++js;
      const std::string na = a.substr(is, ie - is), nb = b.substr(js, je - js);
      if (na.size() != nb.size()) return na.size() < nb.size() ? -1 : 1;
      if (int c = na.compare(nb)) return c < 0 ? -1 : 1;
      i = ie;
      j = je;
      continue;
    }
    if (a[i] != b[j])
      return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]) ? -1 : 1;
    ++i;
    ++j;
  }
  if (i == a.size() && j == b.size()) return 0;
  return i == a.size() ? -1 : 1;
}

std::vector<std::string> path_segments(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

int path_compare(const std::string& a, const std::string& b) {
  const auto sa = path_segments(a), sb = path_segments(b);
  for (size_t i = 0; i < sa.size() && i < sb.size(); ++i) {
    if (int c = natural_compare(sa[i], sb[i])) return c;
  }
  if (sa.size() != sb.size()) return sa.size() < sb.size() ? -1 : 1;
  return a.compare(b) < 0 ? -1 : (a == b ? 0 : 1);
}

}  // namespace

bool case_order_less(const CaseInfo& a, const CaseInfo& b) {
  // Cases with a step (then micro-batch, layer) attribute come first, ordered by it; the rest
  // by path.
  auto key = [](const CaseInfo& c) {
    return std::make_tuple(!c.config.step.has_value(), c.config.step.value_or(0),
                           c.config.run.micro_batch.value_or(0), !c.config.layer.has_value(),
                           c.config.layer.value_or(0));
  };
  if (key(a) != key(b)) return key(a) < key(b);
  return path_compare(a.path, b.path) < 0;
}

void sort_cases(std::vector<CaseInfo>& cases) {
  // Sorts indices, then moves each case once along the permutation's cycles: a stable sort of
  // the cases themselves would hold half of them again in its buffer (a listing of a million
  // cases is most of a gigabyte).
  if (std::is_sorted(cases.begin(), cases.end(), case_order_less)) return;
  std::vector<size_t> order(cases.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return case_order_less(cases[a], cases[b]); });
  // Position n takes the case at order[n]; each cycle is walked once, marking done entries.
  for (size_t start = 0; start < order.size(); ++start) {
    if (order[start] == start) continue;
    CaseInfo held = std::move(cases[start]);
    size_t at = start;
    while (order[at] != start) {
      const size_t from = order[at];
      cases[at] = std::move(cases[from]);
      order[at] = at;
      at = from;
    }
    cases[at] = std::move(held);
    order[at] = at;
  }
}

}  // namespace attnscope
