// Cases from named tensors and scalars (see case_assembly.h).
#include "core/io/case_assembly.h"

#include <map>
#include <set>

#include "core/memory_budget.h"

namespace attnscope {

namespace {

// Key aliases of the schema-1 tensors, as found in bug reports.
struct Alias {
  const char* key;
  const char* name;
};
constexpr Alias kTensorAliases[] = {
    {"q", "q"},
    {"query", "q"},
    {"k", "k"},
    {"key", "k"},
    {"v", "v"},
    {"value", "v"},
    {"mask", "mask"},
    {"attn_mask", "mask"},
    {"attention_mask", "mask"},
    {"bias", "bias"},
    {"attn_bias", "bias"},
    {"o", "o"},
    {"out", "o"},
    {"output", "o"},
    {"do", "do"},
    {"dout", "do"},
    {"grad_out", "do"},
    {"out_grad", "do"},
    {"grad_output", "do"},
    {"lse", "lse"},
    {"softmax_lse", "lse"},
    {"dq", "dq"},
    {"grad_q", "dq"},
    {"q_grad", "dq"},
    {"grad_query", "dq"},
    {"dk", "dk"},
    {"grad_k", "dk"},
    {"k_grad", "dk"},
    {"grad_key", "dk"},
    {"dv", "dv"},
    {"grad_v", "dv"},
    {"v_grad", "dv"},
    {"grad_value", "dv"},
    {"dropout_mask", "dropout_mask"},
    {"cu_seqlens", "cu_seqlens_q"},
    {"cu_seqlens_q", "cu_seqlens_q"},
    {"cu_seqlens_k", "cu_seqlens_k"},
    {"cu_seqlens_kv", "cu_seqlens_k"},
};

const char* const kTypeHint =
    "q, k, v, o, do, dq, dk, dv hold float16, bfloat16, float32 or float64; masks bool or uint8 "
    "(a float attn_mask is read as an additive bias)";

// The case of one group, or why it is invalid. `parents` are the groups above it.
Result<CaseInfo> build_case(const FoundGroup& group, const std::vector<const FoundGroup*>& parents,
                            const std::string& file, const OpenOptions& options,
                            std::map<std::string, TensorLocation>& locations) {
  CaseInfo info;
  info.path = group_path(group.segments);
  const std::string where = file + ": " + info.path;
  for (const FoundGroup* scope : parents) {
    for (const auto& [name, value] : scope->scalars) {
      Status set = set_case_field(info.config, name, value, where, "key");
      if (!set) return set.error();
    }
  }
  std::map<std::string, std::string> taken;  // canonical name -> key
  std::map<std::string, TensorLocation> found;
  for (const FoundTensor& t : group.tensors) {
    const char* alias = tensor_alias(t.key);
    if (alias == nullptr) continue;
    const std::string object = location_key(info.path, t.key);
    std::string name = alias;
    if (name == "mask" && t.problem.empty() && dtype_is_float(t.dtype)) name = "bias";
    auto [it, inserted] = taken.emplace(name, t.key);
    if (!inserted) {
      return make_error(ErrorCode::format,
                        file + ": " + object + ": both '" + it->second + "' and '" + t.key +
                            "' give tensor " + name,
                        "keep one of the aliases");
    }
    if (!t.problem.empty()) {
      return make_error(ErrorCode::format, file + ": " + object + ": " + t.problem,
                        t.hint.empty() ? kTypeHint : t.hint);
    }
    int64_t bytes = static_cast<int64_t>(dtype_size(t.dtype));
    for (int64_t d : t.shape) bytes = saturating_product({bytes, d});
    if (bytes > options.max_tensor_bytes) {
      return make_error(ErrorCode::too_large,
                        file + ": " + object + ": shape needs " + std::to_string(bytes) +
                            " bytes, more than the limit of " +
                            std::to_string(options.max_tensor_bytes),
                        "no dump attnscope can analyse holds a tensor this large; the file is "
                        "probably corrupt (programs can raise OpenOptions::max_tensor_bytes)");
    }
    found[name] = t.where;
    info.tensors.push_back({name, t.key, t.dtype, t.shape});
  }
  // Tensors in kTensorNames order, as HDF5 discovery lists them.
  std::vector<TensorInfo> ordered;
  for (const char* name : kTensorNames) {
    for (TensorInfo& t : info.tensors) {
      if (t.name == name) ordered.push_back(std::move(t));
    }
  }
  info.tensors = std::move(ordered);
  // Without a dtype field the run's precision is q's stored one when that is half precision
  // (a bug report's bf16 tensors come from a bf16 run); fp32 otherwise, as for HDF5.
  const TensorInfo& q = info.tensors.front();
  if (info.config.dtype.empty() && q.name == "q" &&
      (q.dtype == DType::f16 || q.dtype == DType::bf16)) {
    info.config.dtype = dtype_name(q.dtype);
  }
  auto dims = infer_case_dims(info.tensors, info.config.layout, where);
  if (!dims) return dims.error();
  info.dims = *dims;
  info.config.layout = case_layout(info.tensors, info.config.layout);
  for (const TensorInfo& t : info.tensors) {
    locations[location_key(info.path, t.dataset)] = found.at(t.name);
  }
  return info;
}

bool has_qkv(const FoundGroup& group) {
  for (const FoundTensor& t : group.tensors) {
    const char* alias = tensor_alias(t.key);
    if (alias != nullptr && (alias[0] == 'q' || alias[0] == 'k' || alias[0] == 'v') &&
        alias[1] == '\0') {
      return true;
    }
  }
  return false;
}

}  // namespace

const char* tensor_alias(const std::string& key) {
  for (const Alias& a : kTensorAliases) {
    if (key == a.key) return a.name;
  }
  return nullptr;
}

std::string field_alias(const std::string& key) {
  if (key == "softmax_scale") return "scale";
  if (key == "is_causal") return "causal";
  return is_case_field(key) ? key : "";
}

std::string group_path(const std::vector<std::string>& segments) {
  if (segments.empty()) return "/case";
  std::string path;
  for (const std::string& s : segments) path += "/" + s;
  return path;
}

void assemble_cases(const std::vector<FoundGroup>& groups, const std::string& file,
                    const OpenOptions& options, DumpListing& listing) {
  std::map<std::vector<std::string>, const FoundGroup*> by_segments;
  for (const FoundGroup& group : groups) by_segments.emplace(group.segments, &group);
  std::set<std::string> paths;
  for (const FoundGroup& group : groups) {
    if (!has_qkv(group)) continue;
    std::vector<const FoundGroup*> scopes;  // outermost first, the group itself last
    std::vector<std::string> prefix;
    for (size_t depth = 0; depth <= group.segments.size(); ++depth) {
      auto it = by_segments.find(prefix);
      if (it != by_segments.end()) scopes.push_back(it->second);
      if (depth < group.segments.size()) prefix.push_back(group.segments[depth]);
    }
    const std::string path = group_path(group.segments);
    if (!paths.insert(path).second) {
      listing.rejected.push_back(make_error(
          ErrorCode::format, file + ": " + path + ": two groups of tensors map to this case path",
          "rename the key 'case' of the file's top level"));
      continue;
    }
    Result<CaseInfo> info = build_case(group, scopes, file, options, listing.locations);
    if (info) {
      listing.cases.push_back(std::move(*info));
    } else {
      listing.rejected.push_back(info.error());
    }
  }
  sort_cases(listing.cases);
}

}  // namespace attnscope
