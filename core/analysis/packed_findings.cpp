// Findings of a packed sequence (a case cut from a THD group by cu_seqlens): the mask leaking
// across sequences (cross_sequence_attention), and every finding naming the sequence's tokens.
#include "core/analysis/packed_findings.h"

namespace attnscope {

namespace {

// "1 query row", "3 query rows".
std::string count_of(int64_t n, const std::string& what) {
  return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
}

std::string tokens_text(int64_t begin, int64_t end) {
  return std::to_string(begin) + "-" + std::to_string(end - 1);
}

}  // namespace

void add_packed_findings(const CaseData& data, std::vector<Finding>& out) {
  if (!data.info.packed || !data.leak) return;
  const PackedSequence& p = *data.info.packed;
  const CaseData::CrossSequenceLeak& leak = *data.leak;
  Finding f;
  f.kind = FindingKind::cross_sequence_attention;
  f.severity = Severity::error;
  f.tensor = leak.tensor;
  f.rows = {leak.first_row, leak.first_row};
  f.count = leak.entries;
  f.message = "the packed " + leak.tensor + " lets " + count_of(leak.rows, "query row") +
              " of this sequence attend keys of other sequences, " +
              count_of(leak.entries, "(row, key) pair") + " in all (first: row " +
              std::to_string(leak.first_row) + " -> key token " + std::to_string(leak.first_key) +
              ", outside its key tokens " + tokens_text(p.k_begin, p.k_end) +
              "): the block-diagonal mask leaks, so tokens see other documents of the batch";
  f.remedy =
      "build the packed mask from the sequence boundaries (cu_seqlens / position_ids resets) so "
      "that each block only sees its own keys, or use a varlen kernel (flash_attn_varlen_func, "
      "FlexAttention document masking)";
  out.push_back(f);
}

void name_packed_sequence(const CaseInfo& info, std::vector<Finding>& findings) {
  if (!info.packed) return;
  const PackedSequence& p = *info.packed;
  const std::string where =
      " [packed sequence " + std::to_string(p.index) + " of " + std::to_string(p.count) +
      ": query tokens " + tokens_text(p.q_begin, p.q_end) + ", key tokens " +
      tokens_text(p.k_begin, p.k_end) + "; row r = query token " + std::to_string(p.q_begin) +
      " + r, key j = key token " + std::to_string(p.k_begin) + " + j]";
  for (Finding& f : findings) f.message += where;
}

}  // namespace attnscope
