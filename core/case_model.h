// The case model every dump format maps onto (DESIGN §2): a case's configuration, the tensors
// it holds, its attention dimensions, and its data in canonical layout.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/host_tensor.h"
#include "core/result.h"
#include "kernels/attn_params.h"

namespace attnscope {

// How q/k/v/o/dO/dq/dk/dv are laid out in the file. Canonical (in memory) is always BHSD.
//   bhsd: [B, H, S, D]   bshd: [B, S, H, D] (FlashAttention)   hsd: [H, S, D]   sd: [S, D]
//   thd: [T, H, D], the packed sequences of FlashAttention's varlen API (B = 1, S = T tokens;
//   lse [H, T]); cu_seqlens_q / cu_seqlens_k split the tokens into sequences.
enum class Layout : uint8_t { bhsd, bshd, hsd, sd, thd };

const char* layout_name(Layout layout);  // "BHSD", "BSHD", "HSD", "SD", "THD"
std::optional<Layout> parse_layout(const std::string& text);

// Canonical tensor names of schema 1.1 (aliases are resolved by the readers). dropout_mask is
// the run's attention-dropout keep-mask (bool, 1 = kept, broadcastable to [B, H, Sq, Sk]).
// cu_seqlens_q / cu_seqlens_k (int32 / int64, [N+1]: 0, ..., T) are the sequence starts of a
// packed group (q [T, H, D] in layout thd, or one batch row [1, H, T, D] as SDPA packing has
// it); discovery reads them and lists each sequence as a case (packed_sequences.h).
inline constexpr const char* kTensorNames[] = {
    "q", "k",   "v",  "do", "mask", "bias",         "dropout_mask",
    "o", "lse", "dq", "dk", "dv",   "cu_seqlens_q", "cu_seqlens_k"};

// Canonical name of a dataset name ("dout" / "grad_out" -> "do", "attn_bias" -> "bias",
// "cu_seqlens" -> "cu_seqlens_q", "q" -> "q"); nullptr for names that are not schema-1 tensors.
const char* canonical_tensor_name(const std::string& dataset);

// True for tensors laid out like q/k/v (q, k, v, do, o, dq, dk, dv); false for mask, bias, lse.
bool is_sequence_tensor(const std::string& name);
// True for tensors broadcast over the score matrix [B, H, Sq, Sk]: mask, bias, dropout_mask.
bool is_score_tensor(const std::string& name);
// True for the boolean tensors (bool / uint8 elements): mask, dropout_mask.
bool is_bool_tensor(const std::string& name);
// True for the integer tensors (int32 / int64 elements): cu_seqlens_q, cu_seqlens_k.
bool is_index_tensor(const std::string& name);

// The layout tensors of rank `rank` are in: 3 -> hsd (thd when declared), 2 -> sd whatever was
// declared; 4 -> the declared bhsd / bshd (bhsd when the declaration names a 3-D / 2-D layout).
Layout layout_for_rank(size_t rank, Layout declared);

// Run semantics a dump does not record but its recorded o shows (core/analysis/run_inference.h);
// set by the analysis on its copy of a case, never read from a file.
struct InferredRun {
  std::optional<MaskFill> mask_fill;  // the fully-masked-row convention
  std::optional<double> scale;        // the softmax scale (CaseConfig::scale is set to it)
  bool any() const { return mask_fill.has_value() || scale.has_value(); }
  bool operator==(const InferredRun& o) const {
    return mask_fill == o.mask_fill && scale == o.scale;
  }
};

// What the recorder knew about the run that produced a case (schema 1.1 run semantics, DESIGN
// §2; all optional: dumps of schema 1 or of other writers leave them empty).
struct RunRecord {
  std::string torch_version;   // "2.11.0+cu130"
  std::string backend;         // "sdpa_flash", "sdpa_math", "sdpa_efficient", "sdpa_cudnn", ...
  std::string device;          // "cpu", "cuda:0"
  std::string autocast_dtype;  // "bfloat16" when autocast was active (dtype is then that too)
  double dropout_p = 0;        // attention dropout probability of the call
  std::string dropout_replay;  // "mask" (dropout_mask stored) or "unavailable"; "" unknown
  std::string dropout_note;    // why the keep-mask is unavailable
  // "attend" (bool, True = attend: SDPA), "masked_out" (bool, True = masked out:
  // TransformerEngine; readers invert it), "additive" (float bias); "" unknown.
  std::string mask_convention;
  std::optional<int64_t> micro_batch;  // gradient-accumulation index within the step
  // When the call's forward ran and when its dO arrived, counted over the step's attention
  // events (the recorder's counter): the order first-bad follows instead of assuming one.
  std::optional<int64_t> forward_seq, backward_seq;
  std::string library_version;  // version of the library whose kernel ran ("2.7.4" flash_attn)
  // FlexAttention's score_mod: its source text and how replay reproduces it ("bias",
  // "softcap", "softcap+bias": materialised into those; "none"; "unavailable": it cannot be
  // replayed, score_mod_note says why, and the recorded outputs are not compared).
  std::string score_mod, score_mod_replay, score_mod_note;
  InferredRun inferred;
};

// Group attributes of a case; all optional in the file.
struct CaseConfig {
  std::optional<double> scale;  // absent -> 1/sqrt(D)
  bool causal = false;
  CausalAlign causal_align = CausalAlign::top_left;
  std::string dtype;  // precision of the original run ("float16", ...); empty when unknown
  Layout layout = Layout::bhsd;
  double softcap = 0;
  std::optional<int64_t> step;
  std::optional<int64_t> layer;
  std::string name;
  std::string description;
  RunRecord run;

  double effective_scale(int64_t head_dim) const;
};

// Attention sizes of a case, after layout normalisation.
struct CaseDims {
  int64_t batch = 0, heads = 0, kv_heads = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0,
          head_dim_v = 0;
  // Batch broadcasting (legal in torch's SDPA, e.g. a learned-query pooling head): q, or k and
  // v, stored with batch 1 against the other's B. The loaded case repeats them to B; their
  // recorded gradients stay [1, ...], the sum over the batch.
  bool q_broadcast = false, kv_broadcast = false;
  // Whether input `name` (q, k, v) is stored with batch 1 and repeated to the batch on loading.
  bool batch_repeated(const std::string& name) const {
    return name == "q" ? q_broadcast : (name == "k" || name == "v") && kv_broadcast;
  }
  // Whether the recorded gradient `name` (dq, dk, dv) is the sum over a broadcast batch.
  bool batch_summed(const std::string& name) const {
    return name == "dq" ? q_broadcast : (name == "dk" || name == "dv") && kv_broadcast;
  }
};

// One tensor as stored in the file.
struct TensorInfo {
  std::string name;     // canonical name ("do")
  std::string dataset;  // name in the file ("dout")
  DType dtype = DType::f32;
  std::vector<int64_t> shape;  // as stored (file layout)
};

// The layout of a case's stored tensors: layout_for_rank of q's rank, thd for a 3-D q with
// cu_seqlens whatever was declared.
Layout case_layout(const std::vector<TensorInfo>& tensors, Layout declared);

// One sequence of a packed group (layout thd): the case is the group's query tokens
// [q_begin, q_end) against its key tokens [k_begin, k_end) (from cu_seqlens_q / _k).
struct PackedSequence {
  std::string group;  // path of the group holding the packed tensors ("/layer_03")
  int64_t index = 0;  // sequence index, 0-based
  int64_t count = 0;  // sequences in the group (N)
  int64_t q_begin = 0, q_end = 0, k_begin = 0, k_end = 0;
  int64_t total_q = 0, total_k = 0;  // tokens T of the group's q and k

  bool operator==(const PackedSequence& o) const;
};

// What discovery learns about a case without reading any tensor data.
struct CaseInfo {
  std::string path;  // HDF5 group path, "/step_000120/layer_07"; a packed sequence "/layer/seq_2"
  CaseConfig config;
  // A case's sizes. For a packed sequence: B = 1, Sq / Sk = its own token counts.
  CaseDims dims;
  // Present tensors, in kTensorNames order, with their stored shapes (a packed sequence lists
  // the whole group's tensors, without cu_seqlens).
  std::vector<TensorInfo> tensors;
  std::optional<PackedSequence> packed;  // set for one sequence of a packed group

  const TensorInfo* find(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  // Where the tensors are stored: the packed group's path, else `path`.
  const std::string& stored_path() const { return packed ? packed->group : path; }
};

// A loaded case. Tensors are canonical: q [B,H,Sq,D], k [B,Hk,Sk,D], v [B,Hk,Sk,Dv],
// do / o [B,H,Sq,Dv], dq [B,H,Sq,D], dk / dv like k / v, lse [B,H,Sq], mask / bias /
// dropout_mask rank 4 and broadcastable to [B,H,Sq,Sk] (missing leading dims become 1).
struct CaseData {
  CaseInfo info;
  std::map<std::string, HostTensor> tensors;
  // For a packed sequence whose group has a mask / bias: the keys of other sequences its
  // queries attend (load counts them over the group's whole score tensor, which the sliced
  // case no longer holds); empty when nothing leaks.
  struct CrossSequenceLeak {
    std::string tensor;      // "mask" or "bias"
    int64_t rows = 0;        // query rows (over the stored batch / head slices) that leak
    int64_t entries = 0;     // (row, key) pairs attended outside the sequence's keys
    int64_t first_row = -1;  // first leaking pair: row within the sequence,
    int64_t first_key = -1;  // and key token of the packed group
  };
  std::optional<CrossSequenceLeak> leak;

  const HostTensor* find(const std::string& name) const;
  const HostTensor& q() const { return tensors.at("q"); }
  const HostTensor& k() const { return tensors.at("k"); }
  const HostTensor& v() const { return tensors.at("v"); }
};

// Checks that stored shapes agree (ranks for the layout, B/H/D matches, Hk divides H, mask and
// bias broadcastable, recorded outputs shaped like the computation, float tensors float and
// the mask bool / uint8) and derives the dims. `layout` is resolved by layout_for_rank(q rank).
// `where` prefixes messages ("FILE: /case"); messages name the dataset and both shapes.
Result<CaseDims> infer_case_dims(const std::vector<TensorInfo>& tensors, Layout layout,
                                 const std::string& where);

// True when a stored lse of `shape` is sequence-major: [B, Sq, H] (or [Sq, H] for 3-D
// layouts) where schema 1 expects [B, H, Sq], as FlashAttention's qv path and some varlen
// kernels store it. Never when H == Sq (the shapes agree; the analysis then tells by value).
bool lse_sequence_major(const std::vector<int64_t>& shape, const CaseDims& dims);

// Converts a stored tensor to canonical layout (see CaseData) and back. `dims` tells a
// sequence-major lse (lse_sequence_major) from the canonical one; only lse reads it.
HostTensor to_canonical(const std::string& name, const HostTensor& stored, Layout layout,
                        const CaseDims& dims = {});
// from_canonical to hsd / sd needs the dropped leading dims to be 1; mask / bias stay rank 4.
HostTensor from_canonical(const std::string& name, const HostTensor& canonical, Layout layout);

// `config` judged under `inferred` (RunRecord::inferred set, CaseConfig::scale to an inferred
// scale).
void apply_inferred_run(CaseConfig& config, const InferredRun& inferred);

// Repeats the canonical q (CaseDims::q_broadcast) or k and v (kv_broadcast) of `data`, stored
// with batch 1, to the case's batch, as torch broadcasts them.
void expand_broadcast_batch(CaseData& data);

// Case order (DESIGN §2): by step, micro_batch, then layer attribute (cases carrying them
// first), then by the group path compared segment by segment with numbers compared numerically
// ("/step_2/layer_9" < "/step_2/layer_10"), then by the path bytes.
bool case_order_less(const CaseInfo& a, const CaseInfo& b);
void sort_cases(std::vector<CaseInfo>& cases);

}  // namespace attnscope
