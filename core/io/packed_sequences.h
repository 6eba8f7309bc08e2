// Packed sequences (layout thd, DESIGN §2): a group's cu_seqlens_q / cu_seqlens_k split its
// tokens into sequences and each sequence is a case of its own, `GROUP/seq_I`, loaded as the
// rows of its tokens (internal to core/io: DumpReader calls these).
#pragma once

#include <string>

#include "core/case_model.h"
#include "core/io/dump_listing.h"
#include "core/io/dump_source.h"

namespace attnscope {

// Replaces each listed case holding cu_seqlens by one case per sequence, reading the starts
// with `source`. Starts are checked: N+1 integers from 0, non-decreasing, the last <= the
// tokens T of q (k), the same N for q and k (cu_seqlens_k absent: k shares q's starts, which
// needs Tq = Tk). A group whose starts are invalid, or with a sequence that has queries but no
// keys, moves to listing.rejected with the reason; sequences without queries are left out.
// Cases without cu_seqlens are kept as they are (a listing already expanded is unchanged).
void expand_packed_cases(const DumpSource& source, const std::string& file, DumpListing& listing);

// The dims of the whole packed group of `info` (Sq, Sk = its tokens), for to_canonical; the
// case's own dims when it is not a packed sequence.
CaseDims stored_dims(const CaseInfo& info);

// Cuts the group tensors of a packed sequence (canonical layout, as read) down to the case:
// q / o / do / dq / lse to its query tokens, k / v / dk / dv to its key tokens, mask / bias /
// dropout_mask to its block (broadcast dims stay 1). Before cutting, counts in data.leak the
// keys of other sequences that the group's mask / bias lets the sequence's queries attend (a
// bias entry <= kMaskingBias counts as masking).
void cut_packed_sequence(CaseData& data);

// A bias at or below this masks its key: exp(kMaskingBias) is 0 in every precision.
inline constexpr double kMaskingBias = -1e4;

}  // namespace attnscope
