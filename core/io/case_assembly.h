// Turning the named tensors and scalars of a .pt dict, an .npz or a .safetensors file into
// schema-1 cases (internal to core/io). Keys follow what real bug reports use: q / query,
// k / key, v / value, mask / attn_mask / attention_mask (a float one is an additive bias),
// bias / attn_bias, o / out / output, do / dout / grad_out / out_grad, lse / softmax_lse,
// dq / dk / dv (grad_q, q_grad, ...), dropout_mask; scalars scale / softmax_scale,
// causal / is_causal and every schema-1.1 case field (case_fields.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/host_tensor.h"
#include "core/io/case_fields.h"
#include "core/io/dump_listing.h"
#include "core/io/hdf5_dump.h"

namespace attnscope {

// A tensor found in the file under `key`, before validation.
struct FoundTensor {
  std::string key;             // as in the file ("query", "attn_mask")
  DType dtype = DType::f32;    // element type (when `problem` is empty)
  std::vector<int64_t> shape;  // as stored
  TensorLocation where;
  std::string problem;  // why it cannot be read ("element type int64 is not ..."); "" when fine
  std::string hint;     // for `problem`; "" for the element-type hint
};

// What the file holds under one key path ({"layer_3"}, {} for the root, {"0"} for a list's
// first item): a case when it has a tensor named (or aliased) q, k or v.
struct FoundGroup {
  std::vector<std::string> segments;
  std::vector<FoundTensor> tensors;
  std::vector<std::pair<std::string, FieldValue>> scalars;  // case fields (field_alias applied)
};

// The canonical tensor name of a key ("query" -> "q", "attn_mask" -> "mask"); nullptr for
// keys that name no schema-1 tensor.
const char* tensor_alias(const std::string& key);
// The case field a scalar key sets ("is_causal" -> "causal", "softmax_scale" -> "scale", a
// field name -> itself); "" for other keys.
std::string field_alias(const std::string& key);

// The case path of a key path: segments joined by '/', "/case" for the file's root
// ({} -> "/case", {"layer_3"} -> "/layer_3").
std::string group_path(const std::vector<std::string>& segments);

// Appends the cases of `groups` to `listing` (cases sorted, tensor locations recorded) and the
// groups that look like cases but are invalid to listing.rejected, each error naming `file`,
// the group and the key. The scalars of a group apply to it and to every group below it (a
// file-level is_causal covers each layer). Tensors beyond options.max_tensor_bytes are refused.
// A case without a dtype field whose q is float16 / bfloat16 ran in that precision.
void assemble_cases(const std::vector<FoundGroup>& groups, const std::string& file,
                    const OpenOptions& options, DumpListing& listing);

}  // namespace attnscope
